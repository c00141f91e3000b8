"""LINK_RATE, the configured rate of the links between hosts (``make compose-up LINK_RATE=200mbit``: the
compose simulation shapes them with tc), read from a stored run's environment record: the reports and the
models set a measured link beside it. Pure: no torch, no harness."""

from __future__ import annotations

import re
from collections.abc import Mapping

# tc(8) rate units: bit-based (bit, kbit, mbit, gbit, tbit) and byte-based (bps, kbps, ...);
# SI multipliers (tc's k = 1000), plus the IEC forms (kibit, mibps, ...).
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?i?)(bit|bps)?\s*$", re.I)
_MULT = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}


def parse_link_rate(text: str) -> float | None:
    """A tc rate such as ``1gbit``, ``200mbit``, ``125mbps`` in GB/s; None if unparseable.

    As in tc(8), ``bit`` units count bits and ``bps`` units count *bytes* per second;
    a bare number is bits per second.
    """
    m = _RATE.match(str(text))
    if not m:
        return None
    value, prefix, unit = float(m.group(1)), m.group(2).lower(), (m.group(3) or "bit").lower()
    bytes_per_s = value * _MULT[prefix] / (8.0 if unit == "bit" else 1.0)
    return bytes_per_s / 1e9


def configured_link_rate(machine_info: Mapping) -> tuple[str, float] | None:
    """(text, GB/s) of LINK_RATE from the run's environment record (slowest host wins)."""
    hosts = (machine_info.get("suite") or {}).get("hosts") or {}
    found = []
    for h in hosts.values():
        text = (h.get("env") or {}).get("LINK_RATE")
        if text:
            gbps = parse_link_rate(text)
            if gbps:
                found.append((gbps, text))
    if not found:
        return None
    gbps, text = min(found)
    return text, gbps
