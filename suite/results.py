"""The result record.

A record is the ``extra_info`` of one pytest-benchmark entry. ``make_record``
fills the fields every case shares (schema below) and says how each number was
obtained (``provenance``: measured, derived by a named formula, or modelled by a
named model); the harness (suite/harness/runner.py) adds the case's identity and fields.
Files are written by ``suite.common.fileio.write_json_atomic`` (re-exported here).

Records of runs stored before per-rank samples and ``checked`` existed lack those
fields; readers treat a missing ``checked`` as checked (``n_wrong`` was always set).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from suite import metrics
from suite.case import Bytes
from suite.common.fileio import write_json_atomic  # noqa: F401  (re-exported: the one writer)
from suite.measurement import Measurement

TIME_STATS = ("time_us", "p05_us", "p50_us", "p95_us", "p99_us", "min_us", "max_us", "mean_us")
"""The statistics of a case's samples a record holds, µs per op."""
REQUIRED_FIELDS = (
    "experiment",
    "op",
    "backend",
    "device",
    "dtype",
    "world_size",
    "size_bytes",
    "count",
    "in_place",
    "timing_mode",
    "iterations",
    "time_us",
    "p05_us",
    "p50_us",
    "p95_us",
    "p99_us",
    "algbw_gbps",
    "busbw_gbps",
    "n_wrong",
)


PROVENANCE = {
    "time_us": "measured: median over iterations of the per-iteration maximum over ranks ({timer} clock)",
    "p05_us": "measured: percentile over iterations of the per-iteration maximum over ranks (over {n} samples; "
    "reported with >= 20)",
    "p50_us": "measured: percentile over iterations of the per-iteration maximum over ranks",
    "p95_us": "measured: percentile over iterations of the per-iteration maximum over ranks (over {n} samples; "
    "reported with >= 20)",
    "p99_us": "measured: percentile over iterations of the per-iteration maximum over ranks (over {n} samples; "
    "reported with >= 100)",
    "min_us": "measured: minimum over iterations of the per-iteration maximum over ranks",
    "max_us": "measured: maximum over iterations of the per-iteration maximum over ranks",
    "mean_us": "derived: mean over iterations of the per-iteration maximum over ranks",
    "samples_us": "measured: per iteration, the maximum over ranks of each rank's time",
    "rank_median_us": "measured: per rank, the median over iterations of that rank's own time",
    "rank_spread_us": "derived: min / median / max over ranks of rank_median_us",
    "last_done_rank": "measured: per iteration, the rank whose time was the maximum (it finished last; a rank "
    "that arrives late makes every rank wait, so it is not this but late_arrival_rank)",
    "last_done_rank_hist": "derived: per rank, how many iterations it finished last",
    "late_arrival_rank": "measured: per iteration, the rank that entered the op last: the largest time from its "
    "own barrier exit to its op call (the others waited for it inside the op)",
    "late_arrival_rank_hist": "derived: per rank, how many iterations it entered the op last",
    "late_arrival_by_us": "derived: per iteration, the late arrival's time from barrier exit to op call minus "
    "the median of the other ranks' (per sample, not divided)",
    "rank_arrival_us": "measured: per rank, the median over iterations of its time from its barrier exit to its "
    "op call (per sample, not divided)",
    "algbw_gbps": "derived: size_bytes / time_us (nccl-tests algbw, GB = 1e9 B)",
    "busbw_gbps": "derived: algbw_gbps x busbw_factor (nccl-tests busbw)",
    "busbw_factor": "modelled: nccl-tests bus factor of {bw_op} at world_size ranks (ring/flat algorithm)",
    "n_wrong": "measured: elements that differ from the exact expected result, summed over ranks, "
    "in the check run and in every timed buffer set",
    "precision_ci_pct": "derived: half-width of the median's confidence interval over the samples, % of the median, "
    "at the level of the precision loop's last look (suite.metrics.sequential_confidence; >= 95% over all looks)",
    "n_wrong_check": "measured: the wrong elements of the check run, summed over ranks",
    "n_wrong_timed": "measured: the wrong elements of every timed buffer set after the timed region, summed over ranks",
}
"""How each shared number of a record was obtained (stored with the record as ``provenance``)."""

N_WRONG_TOLERANCE = (
    "measured: elements farther from the expected result than the case's stated tolerance (check_rule, "
    "check_tol / check_max_tolerance), summed over ranks, in the check run and in every timed buffer set"
)
"""``n_wrong``'s provenance where the check allows a tolerance (``checked_with_tolerance``)."""

TIMER_DEFINITIONS = {
    "host": "host perf_counter from after the barrier to after the op(s) completed and the device synced; "
    "includes the host's cost of issuing the op(s)",
    "cuda_event": "CUDA events on the current stream around the op(s); the start event is recorded on an idle "
    "stream after the barrier, so the sample includes the host's launch overhead of the op(s) and "
    "the device's execution, not the synchronize after the end event",
}
"""What a sample of each timer includes (recorded as ``timer_definition``; suite/harness/timing.py has the detail)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecordCase:
    """Which case a record is of and where it ran: what names it across runs, with its size (the case's ``Bytes``)."""

    experiment: str
    op: str
    backend: str
    device: str
    world_size: int
    in_place: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckOutcome:
    """What the check of a case found: the wrong elements, summed over ranks, of the check run and of every timed
    buffer set after the timed region (``wrong``), or None where nothing was checked (``unchecked_reason`` says why)."""

    wrong: tuple[int, int] | None
    buffer_sets: int = 0
    """The timed buffer sets checked."""
    unchecked_reason: str | None = None

    @property
    def checked(self) -> bool:
        return self.wrong is not None


def make_record(
    *,
    case: RecordCase,
    size: Bytes,
    m: Measurement,
    check: CheckOutcome,
    provenance: dict | None = None,
    fields: dict | None = None,
) -> dict:
    """Build the shared record of ``case``, ``size`` bytes of it timed as ``m``, checked as ``check``; ``fields``:
    the harness's and the case's own, ``provenance``: how the case obtained its own numbers. ``size.bw_op``
    selects the busbw factor (None: the case has no bus bandwidth, so busbw_gbps and busbw_factor are None).
    ``size.time_includes``: the compute the time includes: busbw_gbps is then None and the factor's rate is
    ``effective_busbw_gbps``, an effective rate of the whole step."""
    extra = fields or {}
    stats = metrics.latency_stats_us(m.samples_s)
    t = m.median_s
    bw_op = size.bw_op or case.op
    algbw, busbw_v, factor, effective = _bandwidths(
        size.size_bytes, t, bw_op, size.bw_op is not None, case.world_size, size.time_includes
    )
    rec = {
        "experiment": case.experiment,
        "op": case.op,
        "backend": case.backend,
        "device": case.device,
        "dtype": size.dtype,
        "world_size": case.world_size,
        "size_bytes": int(size.size_bytes),
        "count": int(size.count),
        "in_place": bool(case.in_place),
        "timing_mode": m.timing_mode,
        "timer": m.timer,
        "timer_definition": TIMER_DEFINITIONS[m.timer],
        "iterations": m.iterations,
        "ops_per_sample": m.ops_per_sample,
        "buffer_sets": m.buffer_sets,
        "warmup_iters": m.warmup_iters,
        "time_us": t * 1e6,
        **stats,
        "algbw_gbps": algbw,
        "busbw_gbps": busbw_v,
        "busbw_factor": factor,
        "checked": check.checked,
        "n_wrong": int(sum(check.wrong)) if check.wrong is not None else None,
        "samples_us": [s * 1e6 for s in m.samples_s],
        **effective,
    }
    if not check.checked:
        rec["unchecked_reason"] = check.unchecked_reason or "not stated"
    rec.update(per_rank_fields(m))
    if m.timing_mode == "cuda_graph":
        rec["graph_kernel_nodes"] = m.graph_kernel_nodes  # None: not counted (no cuda.bindings)
    if m.precision_reached is not None:
        rec["precision_reached"] = m.precision_reached
        rec["precision_ci_pct"] = m.precision_ci_pct
    # the budget: why a case may have fewer samples (warm-up iterations) than it asked for
    rec.update(budget_s=m.budget_s, iters_requested=m.iters_requested, stopped_by_budget=m.stopped_by_budget)
    rec["warmup_requested"] = m.warmup_requested
    check_run, timed = check.wrong or (None, None)
    rec.update(n_wrong_check=check_run, n_wrong_timed=timed, buffer_sets_checked=check.buffer_sets)
    rec.update(extra)
    rec["provenance"] = _provenance(rec, m, bw_op, extra, size.time_includes) | (provenance or {})
    return rec


def _bandwidths(size_bytes: int, t: float, bw_op: str, busbw: bool, world: int, time_includes: str | None) -> tuple:
    """(algbw, busbw, the bus factor, the effective-rate fields) of a case moving ``size_bytes`` in ``t`` s; a time
    that includes compute (``time_includes``) has no busbw, its factor's rate is an effective one instead."""
    factor = metrics.busbw_factor(bw_op, world) if busbw and bw_op in metrics.OPS_WITH_FACTOR else None
    if busbw and factor is None and size_bytes > 0:
        raise ValueError(f"no bus-bandwidth factor for op {bw_op!r}; known: {', '.join(metrics.OPS_WITH_FACTOR)}")
    algbw = metrics.algbw_gbps(size_bytes, t) if size_bytes > 0 and t > 0 else 0.0
    busbw_v = algbw * factor if factor is not None else (0.0 if busbw else None)
    if time_includes is None:
        return algbw, busbw_v, factor, {}
    # not nccl-tests busbw: the time is not the communication's alone
    return algbw, None, None, {"effective_busbw_gbps": busbw_v, "time_includes": time_includes}


def _provenance(rec: dict, m: Measurement, bw_op: str, extra: dict, time_includes: str | None) -> dict:
    """How each number of ``rec`` was obtained (PROVENANCE, worded for this record)."""
    prov = {
        k: v.format(timer=m.timer, bw_op=bw_op, n=m.iterations) for k, v in PROVENANCE.items() if rec.get(k) is not None
    }  # no claim for a number the record does not have (busbw, n_wrong) ...
    per_op = []
    if m.ops_per_sample > 1:
        per_op.append(f"divided by the {m.ops_per_sample} ops of a sample")
    divisor = extra.get("time_divisor", 1)
    if divisor != 1:
        per_op.append(f"divided by {divisor:zg} ({extra.get('time_normalisation', 'see time_normalisation')})")
    if per_op:
        for k in (*TIME_STATS, "samples_us", "rank_median_us"):
            if k in prov:
                prov[k] += "; " + ", ".join(per_op)
    if "n_wrong" in prov and checked_with_tolerance(rec):  # not "differ from the exact result"
        prov["n_wrong"] = N_WRONG_TOLERANCE
    for k, q in TAIL_PERCENTILES.items():  # ... but a tail left out says why
        if rec[k] is None:
            prov[k] = (
                f"measured: null, not reported from {m.iterations} sample(s): a p{q:02d} needs >= "
                f"{metrics.tail_min_samples(q)} "
                "(with fewer it is the sample maximum or minimum, not a tail)"
            )
    if time_includes is not None:
        prov["algbw_gbps"] = f"derived: size_bytes / time_us, a time that includes {time_includes} (an effective rate)"
        prov["effective_busbw_gbps"] = (
            f"derived: algbw_gbps x the {bw_op} bus factor, over a time that includes {time_includes}: an "
            "effective rate of the whole step (at most the communication's own busbw), not nccl-tests busbw"
        )
    return prov


def checked_with_tolerance(rec: dict) -> bool:
    """Whether the record's check allowed a stated tolerance instead of exact equality (DDP's
    ``check_rule`` "tol ...", model_parallel's ``check_exact: false``)."""
    return rec.get("check_exact") is False or str(rec.get("check_rule", "exact")) != "exact"


TAIL_PERCENTILES = {"p05_us": 5, "p95_us": 95, "p99_us": 99}
"""The tail percentiles of a record and their q: null with fewer samples than suite.metrics.tail_min_samples(q)."""


def n_samples(rec: dict) -> int:
    """How many per-iteration samples a record's statistics are over (its ``samples_us``, else ``iterations``)."""
    return len(rec.get("samples_us") or ()) or int(rec.get("iterations") or 0)


def median_ci_pct(rec: dict) -> float | None:
    """How well a case's median is known: the half-width of its confidence interval, % of the median, as
    precision mode judged it (``precision_ci_pct``, at its last look's level: the 95% CI of the samples
    would claim more than an interval re-tested after every round may), else the 95% CI of its samples
    (None with fewer than 2)."""
    if rec.get("precision_ci_pct") is not None:
        return rec["precision_ci_pct"]
    xs = rec.get("samples_us")
    return metrics.median_ci_halfwidth_pct(xs) if xs and len(xs) >= 2 else None


def tail_us(rec: dict, key: str) -> float | None:
    """A tail percentile (``p05_us``, ``p95_us``, ``p99_us``) of a record, None where its samples are too
    few for it (records stored before the rule carry one anyway; readers ask here)."""
    v = rec.get(key)
    n = n_samples(rec)
    return v if v is not None and n >= metrics.tail_min_samples(TAIL_PERCENTILES[key]) else None


def band_us(rec: dict) -> tuple[float, float]:
    """The spread a plot draws around a record's median: p05–p95 where its samples are enough for them,
    else min–max (fewer than 20 samples), else the median itself."""
    lo, hi = tail_us(rec, "p05_us"), tail_us(rec, "p95_us")
    if lo is None or hi is None:
        lo, hi = rec.get("min_us"), rec.get("max_us")
    t = rec["time_us"]
    return (t, t) if lo is None or hi is None else (lo, hi)


BAND_LABEL = "p05–p95 (min–max with < 20 samples)"
"""What ``band_us`` is, for axis titles and legends."""


def per_rank_fields(m: Measurement) -> dict:
    """Per-rank medians, per iteration the rank that finished last and the one that entered the op last
    (with their histograms), each rank's median arrival (empty when not measured)."""
    if m.rank_median_s is None or m.last_done_rank is None:
        return {}
    med = [x * 1e6 for x in m.rank_median_s]
    n = len(med)  # the group's ranks, or those that take part (Case.timing.rank_fields_of; group_ranks)
    out = {
        "rank_median_us": med,
        "rank_spread_us": {"min": min(med), "median": metrics.percentile(med, 50), "max": max(med)},
    }
    if n > 1:  # one rank timed: nothing to rank
        out["last_done_rank"] = list(m.last_done_rank)
        out["last_done_rank_hist"] = _hist(m.last_done_rank, n)
    if m.late_arrival_rank is not None:
        if n > 1:
            out["late_arrival_rank"] = list(m.late_arrival_rank)
            out["late_arrival_rank_hist"] = _hist(m.late_arrival_rank, n)
            out["late_arrival_by_us"] = [x * 1e6 for x in m.late_arrival_by_s or []]
        out["rank_arrival_us"] = [x * 1e6 for x in m.rank_arrival_median_s or []]
    if m.rank_samples_s is not None:
        out["rank_samples_us"] = [[x * 1e6 for x in r] for r in m.rank_samples_s]
    if m.rank_arrivals_s is not None:
        out["rank_arrivals_us"] = [[x * 1e6 for x in r] for r in m.rank_arrivals_s]
    return out


def _hist(ranks: list[int], n: int) -> list[int]:
    """Per position 0..n-1, how many entries of ``ranks`` name it."""
    hist = [0] * n
    for r in ranks:
        hist[r] += 1
    return hist


TABLES_FILE = "tables.txt"
"""A run's text tables, nccl-tests style, as a terminal used to end with them (rank 0 writes ``<run>/tables.txt``
for grep; the launcher's summary names it)."""


def load_run(path: str | os.PathLike) -> dict:
    """Load a run: a results directory (its bench.json) or a JSON file."""
    p = Path(path)
    if p.is_dir():
        p = p / "bench.json"
    with open(p) as fh:
        return json.load(fh)


def records(run: dict) -> list[dict]:
    """The extra_info records of a loaded run, in run order."""
    return [b["extra_info"] for b in run.get("benchmarks", []) if b.get("extra_info")]


def ranks_oversubscribed(run: dict) -> bool:
    """Whether a run's ranks outnumbered the usable cores of any of its hosts (machine_info's ``cpu_share`` of
    each host, suite/system/cpu_load.py): every time of the run then includes waits for a core."""
    hosts = (((run.get("machine_info") or {}).get("suite") or {}).get("hosts")) or {}
    return any((h.get("cpu_share") or {}).get("oversubscribed") == "ranks" for h in hosts.values())


def oversubscribed(rec: dict) -> bool:
    """A record of the pass the launcher ran with more ranks than usable cores, for the cases that need them
    (``oversubscribed``: suite/launch/passes.py): its checks count, its times measure CPU contention."""
    return bool(rec.get("oversubscribed"))


OVERSUBSCRIBED_NOTE = (
    "OVERSUBSCRIBED pass: more ranks than usable cores, run for their checks; their times measure CPU contention, "
    "not communication, and are left out of the headline, the fits and the compare gate"
)
"""What marks the oversubscribed pass's records in the tables and the report."""


def communication_records(recs: list[dict]) -> list[dict]:
    """The records whose times measure communication: all but those marked ``oversubscribed``. What the headline,
    the fits and the compare gate read."""
    return [r for r in recs if not oversubscribed(r)]
