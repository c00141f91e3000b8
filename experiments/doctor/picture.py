"""The doctor's first picture (its spec's ``glance`` hook, and the first figure of its section): the rank x rank
link matrices with the finding outlined -- a slow link's cell, a weak node's rows (what it sends) or columns
(what it receives) -- and, where a rank straggles, every rank's median time as a bar under them with the
straggler's in red; the caption names the finding, or says healthy. Reads stored records only."""

from __future__ import annotations

import statistics

from suite.api import Picture, rank_plots, records

from . import stragglers, verdict

AFFECTED = {
    "outgoing bandwidth": ("bandwidth", "rows"),
    "incoming bandwidth": ("bandwidth", "columns"),
    "latency": ("latency", "rows"),
    "both directions at once": ("bidirectional", "rows"),
}
"""A weak node's affected kind of link (findings.py) -> the matrix and the side of it that shows it."""
READING = "Each cell is one link's median over its passes (rows send, columns receive)"


def glance(run: dict, recs: list[dict]) -> Picture | None:
    """The picture of the run's diagnosis; None for a run without the doctor's probes."""
    d = verdict.diagnose(run)
    return None if d.verdict == "no probes" else picture(run, d)


def picture(run: dict, d: verdict.Diagnosis) -> Picture:
    bars = straggler_bars(records(run), d)
    title = "doctor: the links between ranks" + (
        f"; {len(d.findings)} finding(s) in red" if d.findings else f", {d.verdict}"
    )
    png = rank_plots.link_matrices(d.links, d.hosts, title=title, blocks=blocks(d), bars=bars)
    return Picture(title=title, png=png, caption=caption(d, bars))


def blocks(d: verdict.Diagnosis) -> list[rank_plots.Block]:
    """The frame of each weak node around its ranks, in each matrix that shows what is affected."""
    return [
        rank_plots.Block(probe=AFFECTED[what][0], axis=AFFECTED[what][1], ranks=tuple(w["ranks"]), label=w["host"])
        for w in d.weak_nodes
        for what in w["affected"]
        if what in AFFECTED and w["ranks"]
    ]


def straggler_bars(recs: list[dict], d: verdict.Diagnosis) -> rank_plots.RankBars | None:
    """Every rank's median time in the probe that named the worst straggler (the compute probe's passes pooled
    when the compute probe named it, else the communication probe where it stood out most, as own times);
    None without a straggler."""
    if not d.stragglers:
        return None
    worst = max(d.stragglers, key=lambda s: s["ratio"])
    flagged = [s["rank"] for s in d.stragglers]
    if worst["in_compute"]:
        values = [r["compute_median_us"] for r in d.ranks]
        return rank_plots.RankBars(title="compute probe: each rank's median time", values_us=values, flagged=flagged)
    probes = dict(stragglers.rank_time_probes(recs))
    label = max(
        (x for x in worst["evidence"] if x in probes),
        key=lambda x: _ratio(probes[x], worst["rank"]),
        default=None,
    )
    if label is None:
        return None
    values = [statistics.median(row) for row in probes[label]]
    return rank_plots.RankBars(
        title=f"{label}: each rank's median own time (less its wait for the last to arrive)",
        values_us=values,
        flagged=flagged,
    )


def _ratio(per_rank: list[list[float]], rank: int) -> float:
    meds = [statistics.median(row) for row in per_rank]
    others = statistics.median(m for r, m in enumerate(meds) if r != rank)
    return meds[rank] / others if others > 0 else 0.0


def caption(d: verdict.Diagnosis, bars: rank_plots.RankBars | None) -> str:
    """One line: the finding and where the picture shows it, or healthy and what a finding would look like."""
    if d.verdict == "inconclusive":
        return f"doctor: {d.headline}. {READING}; a slow link would be boxed in red."
    if not d.findings:
        return (
            "doctor: healthy: no link slower than its class or the expected rate, no straggler. "
            f"{READING}; a slow link would be boxed in red."
        )
    where = []
    if d.slow_links and any(f.kind == "slow_link" for f in d.findings):
        where.append("the slow link boxed in red in the matrices")
    if blocks(d):
        where.append("the weak node's rows (what it sends) or columns (what it receives) framed in dashed red")
    if bars is not None:
        where.append(f"rank {', '.join(str(r) for r in bars.flagged)} in red in the bars below")
    return f"doctor: {d.headline}" + ("; " + " and ".join(where) if where else "") + f". {READING}."
