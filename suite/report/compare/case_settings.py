"""Settings that change what a case measures, compared before any verdict (suite/report/compare/__init__.py).

A run's settings (``run_settings``: torch/backend versions and threads, hosts, the config's timing and
experiment knobs) and each record's ``CASE_SETTINGS`` are compared between the sides of a comparison;
``settings_differences`` names every difference and the matched cases it affects. Reads stored JSON only.
"""

from __future__ import annotations

from collections.abc import Sequence

from suite import registry

CASE_SETTINGS = (
    "ops_per_sample",
    "hosts",
    "warmup_iters",
    "iterations",
    "budget_s",
    "iters_requested",
    "warmup_requested",
)
"""Record fields that change what a case measures without naming it (pipeline depth, hosts, warm-up,
iterations, the sample budget). A field whose value varies between the runs of one side is taken as measured, not set
(``iterations`` under PRECISION_PCT, where the records carry ``precision_reached``); so are ``iterations``
and ``warmup_iters`` where a sample budget decided them (records with ``budget_s`` > 0: the counts asked
for, ``iters_requested`` and ``warmup_requested``, are the settings)."""


_ASKED = ("budget_s", "iters_requested", "warmup_requested")
"""The budget and counts asked for; a record from before they were recorded lacks them, and its run's
``iterations`` and ``warmup_iters`` (compared as they are) are what it asked for."""


def _measured(field: str, recs: Sequence[dict]) -> bool:
    """Whether the records' ``field`` is an outcome of the run, not a setting (``CASE_SETTINGS``)."""
    budget = any((r.get("budget_s") or 0) > 0 for r in recs)
    if field == "iterations":
        return budget or any("precision_reached" in r for r in recs)
    return field == "warmup_iters" and budget and all("warmup_requested" in r for r in recs)


def _sections() -> tuple[str, ...]:
    """Config sections of one experiment each (the experiments with settings): a difference there affects
    that experiment's cases."""
    return tuple(name for name, spec in registry.discover().items() if spec.settings is not None)


_CASE_LEVEL = {"pipeline_depth", "iters", "warmup_iters", "n_hosts"}
"""Run settings whose effect each record states (``CASE_SETTINGS``): listed, and judged per case."""


def run_settings(run: dict) -> dict:
    """The settings of a stored run that change what its cases measure, name -> value: the
    torch/backend versions and threads, hosts, and the config's timing and experiment knobs (not
    the ones that only choose which cases run, such as sizes and dtypes)."""
    su = (run.get("machine_info") or {}).get("suite") or {}
    out = {k: v for k, v in (su.get("versions") or {}).items()}
    if "n_hosts" in su:
        out["n_hosts"] = su["n_hosts"]
    cfg = (run.get("suite") or {}).get("config") or {}
    for k in ("precision_pct", "pipeline_depth", "iters", "warmup_iters"):
        if k in cfg:
            out[k] = cfg[k]
    for section in _sections():
        for k, v in (cfg.get(section) or {}).items():
            out[f"{section}.{k}"] = v
    return out


def _values(xs) -> str:
    return "/".join(sorted({str(x) for x in xs}))


def _case_settings_differ(brecs: list[dict], nrecs: list[dict]) -> list[str]:
    """The ``CASE_SETTINGS`` fields set to one value on each side, a different one on the other."""
    out = []
    for f in CASE_SETTINGS:
        if _measured(f, (*brecs, *nrecs)) or (f in _ASKED and any(f not in r for r in (*brecs, *nrecs))):
            continue  # a run stored before records said what was asked for ran what it asked: the counts say it
        vb, vn = {str(r.get(f)) for r in brecs}, {str(r.get(f)) for r in nrecs}
        if len(vb) == 1 and len(vn) == 1 and vb != vn:
            out.append(f)
    return out


def settings_differences(
    base_settings: Sequence[dict], new_settings: Sequence[dict], bmap: dict, nmap: dict, keys: list[tuple]
) -> tuple[list[str], set[tuple]]:
    """The settings that differ between the sides (one line each, run settings first) and the matched
    cases they affect: every case for a version or thread count, an experiment's cases for its
    knobs, and per case the ``CASE_SETTINGS`` its records state."""
    lines, every, experiments = [], False, set()
    sections = _sections()
    names = sorted({n for s in (*base_settings, *new_settings) for n in s})
    for n in names:
        vb, vn = (_values(s.get(n) for s in side) for side in (base_settings, new_settings))
        if not base_settings or not new_settings or vb == vn:
            continue
        section = n.split(".", 1)[0]
        scope = (
            f"the {section} cases"
            if section in sections
            else ("the cases whose records differ" if n in _CASE_LEVEL else "every case")
        )
        lines.append(f"{n}: {vb} vs {vn} ({scope})")
        if section in sections:
            experiments.add(section)
        elif n not in _CASE_LEVEL:
            every = True
    affected, per_field = set(), {}
    for k in keys:
        fields = _case_settings_differ(bmap[k], nmap[k])
        for f in fields:
            per_field.setdefault(f, []).append(k)
        if every or fields or dict(k).get("experiment") in experiments:
            affected.add(k)
    for f, ks in per_field.items():
        b, n = _values(r.get(f) for k in ks for r in bmap[k]), _values(r.get(f) for k in ks for r in nmap[k])
        lines.append(f"{f} (per case): {b} vs {n} in {len(ks)} case(s)")
    return lines, affected
