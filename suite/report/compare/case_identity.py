"""What a case is across runs: its identity (``case_key``), its name for people (``describe_key``), and each
case's records gathered from a side's runs (``records_by_case``). Reads stored records only.

Cases are matched across runs by their identity: the fields the case declares in its record's
``identity`` (experiment, op, variant, backend, device, dtype, world_size, size_bytes, in_place,
redop, root, src/dst, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

from suite import results

MEASUREMENT_FIELDS = frozenset(
    {
        *results.TIME_STATS,
        "algbw_gbps",
        "busbw_gbps",
        "busbw_factor",
        "n_wrong",
        "samples_us",
        "iterations",
        "warmup_iters",
        "ops_per_sample",
        "precision_reached",
        "budget_s",
        "iters_requested",
        "stopped_by_budget",
        "hosts",
        "label",
    }
)
"""Fields that are measurements (or bookkeeping), not part of what a case *is*."""
_MEASURED_SUFFIXES = (
    "_us",
    "_ms",
    "_s",
    "_gbps",
    "_pct",
    "_per_s",
    "_frac",
    "_fraction",
    "_ratio",
    "memory_bytes",
    "_mem_bytes",
    "_peak_bytes",
)
"""Suffixes of measured quantities that experiments add (ddp: samples_per_s, overlap_pct, ...)."""

COMMON_IDENTITY = ("experiment", "op", "backend", "device", "world_size", "timing_mode", "dtype", "size_bytes")
"""Identity fields every declared case has; a record's ``identity`` lists the case's own."""


def case_key(rec: dict) -> tuple:
    """The identity of a case, sorted by name.

    Records made by the harness name their identity fields (``identity``, declared by
    the case); for runs stored before that, the identity is guessed as the
    non-measurement scalar fields."""
    if isinstance(rec.get("identity"), list):
        names = set(COMMON_IDENTITY) | set(rec["identity"])
        return tuple(sorted(((k, rec.get(k)) for k in names if k in rec), key=lambda kv: kv[0]))
    items = []
    for k, v in rec.items():
        if k in MEASUREMENT_FIELDS or (k != "size_bytes" and k.endswith(_MEASURED_SUFFIXES)):
            continue
        if isinstance(v, float) or isinstance(v, (list, dict)):
            continue
        items.append((k, v))
    return tuple(sorted(items, key=lambda kv: kv[0]))


def describe_key(key: tuple) -> str:
    d = dict(key)
    parts = [str(d.get("experiment", "")), str(d.get("variant") or d.get("op", ""))]
    for k in ("backend", "device", "dtype", "redop"):
        if d.get(k) not in (None, "", "none"):
            parts.append(str(d[k]))
    if "src" in d and "dst" in d:
        parts.append(f"{d['src']}->{d['dst']}")
    if d.get("size_bytes") is not None:
        parts.append(f"{d['size_bytes']}B")
    if "in_place" in d:
        parts.append("inplace" if d["in_place"] else "oop")
    known = {
        "experiment",
        "variant",
        "op",
        "backend",
        "device",
        "dtype",
        "redop",
        "src",
        "dst",
        "size_bytes",
        "in_place",
        "function",
        "world_size",
        "timing_mode",
        "root",
        "count",
    }
    extra = [f"{k}={v}" for k, v in key if k not in known]
    return "-".join(p for p in parts if p) + (" " + " ".join(extra) if extra else "")


def records_by_case(runs: Sequence[Sequence[dict]]) -> dict:
    """case key -> the case's record in each run that has it (runs in order)."""
    out: dict = {}
    for recs in runs:
        for r in recs:
            out.setdefault(case_key(r), []).append(r)
    return out
