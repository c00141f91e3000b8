"""The doctor's probes as one text table (its spec's ``table``): every case by its full label, whose end
tells the passes, sizes and forms apart, and every time in the unit a person reads (µs, ms, s). The
verdict (verdict.py) follows it at the end of a run."""

from __future__ import annotations

from suite.api import iters_label, metrics, tail_cell, wrong_cell

from .links import fmt_rate

RATED = ("bandwidth", "bidirectional", "ring", "all_reduce", "all_gather")
"""The probes whose rate means something (a latency probe's 64 bytes, or a computation, have none)."""


def format_tables(records: list[dict]) -> str:
    """One table of the doctor's probes, grouped by probe in the order they ran (its passes together)."""
    probes = list(dict.fromkeys(r["probe"] for r in records))
    recs = sorted(records, key=lambda r: probes.index(r["probe"]))  # stable: each probe's cases in run order
    first = recs[0]
    w = max(len(r["label"]) for r in recs)
    lines = [
        f"# doctor: the probes ({first['backend']}, {first['device']}, {first['world_size']} ranks, "
        f"{iters_label(recs)}; every rank's own samples kept: the verdict follows)",
        f"#{'probe':<13} {'case':<{w}} {'size':>7} {'median':>9} {'p95':>9} {'algbw':>11} {'#wrong':>6}",
    ]
    for r in recs:
        size = f"{metrics.format_size(r['size_bytes'])}B" if r["size_bytes"] else "-"
        rate = fmt_rate(r["algbw_gbps"]) if r["probe"] in RATED and r.get("algbw_gbps") else "-"
        lines.append(
            f" {r['probe']:<13} {r['label']:<{w}} {size:>7} {metrics.format_time_us(r['time_us']):>9}"
            f" {tail_cell(r, 'p95_us', metrics.format_time_us, 9)} {rate:>11} {wrong_cell(r)}"
        )
    return "\n".join(lines) + "\n"
