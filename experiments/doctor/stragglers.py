"""The doctor's stragglers: in every probe where all ranks work at once, each rank's own time against the
others' per sample (a sign test), pooled over the compute probe's passes (verdict.py's docstring has the
rule). Reads stored records only."""

from __future__ import annotations

import math
import statistics

from suite.api import metrics

from .links import EXPERIMENT

STRAGGLER_FACTOR = 1.25
ALPHA = 0.01
ALL_RANK_PROBES = ("compute", "ring", "all_reduce", "all_gather")


def binomial_upper_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return min(1.0, sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1)))


def own_times_us(rec: dict) -> list[list[float]]:
    """Each rank's own time of each sample of a communication probe's record: its sample minus how long it
    waited inside the op for the last rank to arrive (the latest arrival minus its own, in the samples'
    units: arrivals are per sample, samples are divided by ops_per_sample and time_divisor). The samples
    themselves when the record has no arrivals (runs stored before they were recorded)."""
    samples, arrivals = rec["rank_samples_us"], rec.get("rank_arrivals_us")
    if not arrivals:
        return samples
    per = rec.get("ops_per_sample", 1) * rec.get("time_divisor", 1)
    latest = [max(col) for col in zip(*arrivals)]
    return [[t - (latest[i] - a[i]) / per for i, t in enumerate(row)] for row, a in zip(samples, arrivals)]


def rank_time_probes(recs: list[dict]) -> list[tuple[str, list[list[float]]]]:
    """(label, every rank's own time of every sample) of each stored probe where every rank works at once:
    the samples of the compute probe (no op to wait in), ``own_times_us`` of the communication probes."""
    return [
        (r["label"], r["rank_samples_us"] if r["probe"] == "compute" else own_times_us(r))
        for r in recs
        if r.get("experiment") == EXPERIMENT and r.get("probe") in ALL_RANK_PROBES and r.get("rank_samples_us")
    ]


def straggler_in_probe(
    rank_samples_us: list[list[float]], rank_arrivals_us: list[list[float]] | None = None
) -> list[dict]:
    """Per rank: in how many samples it was slower than the median of the others (a sign test: without a
    straggler, 1/2 per sample whatever the distribution), the one-sided p-value, how often it was the
    slowest (and, with arrivals, how often it entered the op last), its median over the others' and how
    long the others waited for it; ``flagged`` when both the count (p < ALPHA / n) and the effect
    (ratio >= STRAGGLER_FACTOR) hold."""
    n = len(rank_samples_us)
    m = min(len(r) for r in rank_samples_us) if n else 0
    if n < 2 or m < 1:
        return []
    slowest = metrics.last_per_sample([r[:m] for r in rank_samples_us])[0]
    late = metrics.last_per_sample([r[:m] for r in rank_arrivals_us])[0] if rank_arrivals_us else None
    meds = [statistics.median(r[:m]) for r in rank_samples_us]
    out = []
    for r in range(n):
        others_at = [statistics.median(rank_samples_us[j][i] for j in range(n) if j != r) for i in range(m)]
        above = sum(rank_samples_us[r][i] > others_at[i] for i in range(m))
        p = binomial_upper_tail(above, m, 0.5)
        others = statistics.median([meds[j] for j in range(n) if j != r])
        ratio = meds[r] / others if others > 0 else math.inf
        holdback = statistics.median(rank_samples_us[r][i] - others_at[i] for i in range(m))
        out.append(
            {
                "rank": r,
                "slower_than_others": above,
                "slowest": slowest.count(r),
                "late_arrival": None if late is None else late.count(r),
                "samples": m,
                "p_value": p,
                "median_us": meds[r],
                "others_median_us": others,
                "ratio": ratio,
                "holds_back_us": holdback,
                "flagged": p < ALPHA / n and ratio >= STRAGGLER_FACTOR,
            }
        )
    return out


def pooled_compute(recs: list[dict]) -> tuple[list[str], list[list[float]]]:
    """(the compute probe's labels, every rank's samples of its passes pooled): each sample is still compared
    within its own iteration."""
    pooled: list[list[float]] = []
    labels = []
    for r in recs:
        if r.get("probe") == "compute" and r.get("rank_samples_us"):
            pooled = (
                [a + b for a, b in zip(pooled, r["rank_samples_us"])]
                if pooled
                else [list(x) for x in r["rank_samples_us"]]
            )
            labels.append(r["label"])
    return labels, pooled


def _per_probe_evidence(recs: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """(probe, label, per-rank straggler evidence) for the probes where every rank works at once; the compute
    probe's passes are pooled (each sample is compared within its own iteration) and come first."""
    per_probe: list[tuple[str, str, list[dict]]] = [
        (r["probe"], r["label"], straggler_in_probe(own_times_us(r), r.get("rank_arrivals_us")))
        for r in recs
        if r.get("probe") in ALL_RANK_PROBES and r["probe"] != "compute" and r.get("rank_samples_us")
    ]
    labels, pooled = pooled_compute(recs)
    if pooled:
        per_probe.insert(0, ("compute", " + ".join(labels), straggler_in_probe(pooled)))
    return per_probe


def rank_entries(recs: list[dict], world: int, hosts: list[str]) -> tuple[list[dict], list[dict]]:
    """Per rank: its evidence in every all-rank probe; a straggler when every compute pass or most
    communication probes flag it. Returns (ranks, stragglers)."""
    per_probe = _per_probe_evidence(recs)
    ranks, stragglers = [], []
    compute = [p for p in per_probe if p[0] == "compute"]
    comm = [p for p in per_probe if p[0] != "compute"]
    for rank in range(world):
        rows = [(probe, label, s[rank]) for probe, label, s in per_probe if len(s) > rank]
        in_compute = bool(compute) and all(s[rank]["flagged"] for _, _, s in compute if len(s) > rank)
        comm_flags = [s[rank]["flagged"] for _, _, s in comm if len(s) > rank]
        in_comm = bool(comm_flags) and sum(comm_flags) > len(comm_flags) / 2
        comp_rows = [row for p, _, row in rows if p == "compute"]
        entry = {
            "rank": rank,
            "host": hosts[rank],
            "compute_median_us": statistics.median(x["median_us"] for x in comp_rows) if comp_rows else None,
            "compute_ratio": statistics.median(x["ratio"] for x in comp_rows) if comp_rows else None,
            "slowest_in": {label: f"{row['slowest']}/{row['samples']}" for _, label, row in rows},
            "late_arrival_in": {
                label: f"{row['late_arrival']}/{row['samples']}"
                for _, label, row in rows
                if row["late_arrival"] is not None
            },
            "slower_than_others_in": {label: f"{row['slower_than_others']}/{row['samples']}" for _, label, row in rows},
            "holds_back_us_in": {label: row["holds_back_us"] for _, label, row in rows},
            "straggler": in_compute or in_comm,
            "in_compute": in_compute,
            "evidence": [label for _, label, row in rows if row["flagged"]],
        }
        ranks.append(entry)
        if entry["straggler"]:
            # the headline: the compute probe when it named the rank (the others wait that long at the next
            # collective), else the communication probe where it stood out most
            pick = [row for p, _, row in rows if row["flagged"] and (p == "compute") == in_compute]
            best = max(pick or [row for _, _, row in rows if row["flagged"]], key=lambda x: x["ratio"])
            # and what the others waited for it inside the collectives that named it: where ranks share cores,
            # its peers compute faster while it is away, so its compute figure can read far less than that
            comm_held = [row["holds_back_us"] for p, _, row in rows if p != "compute" and row["flagged"]]
            stragglers.append(
                {
                    **entry,
                    **{
                        k: best[k]
                        for k in (
                            "ratio",
                            "holds_back_us",
                            "p_value",
                            "slowest",
                            "late_arrival",
                            "samples",
                            "slower_than_others",
                            "median_us",
                            "others_median_us",
                        )
                    },
                    "in_compute": in_compute,
                    "in_communication": in_comm,
                    "holds_back_in_communication_us": statistics.median(comm_held) if in_comm else None,
                }
            )
    return ranks, stragglers
