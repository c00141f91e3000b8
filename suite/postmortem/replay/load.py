"""A run's training steps as the replay reads them: each rank's ``step`` spans from the run's timeline
(``<run>/trace.json``) and the communication ops inside them from the run's profiler traces
(``<run>/profiles/<case>.rank<r>.json``, ``make bench-cpu PROFILE=1``).

Why both: the timeline's journal sees the calls of ``torch.distributed`` functions, not the ops issued below them
(DistributedDataParallel's bucket all-reduces, FSDP's and DTensor's collectives) nor, inside a timed sample, each
op's own start and end; the profiler sees every op the backend runs (``gloo:<op>``, on the backend's own threads:
when the op ran, waits for its peers included). The two clocks meet on Unix time: the timeline's ``ts`` counts from
``otherData.epoch_unix_s``, the profiler's from ``baseTimeNanoseconds``. The two anchors can disagree by
milliseconds (10 ms seen on a loaded host), so each rank's profile is shifted onto its timeline by the ops both
record outside the timed samples (the harness's barriers): the median gap between each profiled barrier's end
and the nearest recorded one.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
import statistics
from pathlib import Path

from suite import op_table
from suite.postmortem.replay.graph import RankStep, key_ops

OP_PREFIXES = ("gloo:", "nccl:", "mpi:")
"""The profiler's names of the ops a backend ran."""


class BadInput(ValueError):
    """A run the replay cannot read: one line for the user."""


def profile_name(case: str) -> str:
    """The file stem of a case's profile (suite/harness/profiling.py ``trace_path``), without its rank."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", case).strip("_")[:150] or "case"


def read_timeline(run: Path) -> dict:
    path = run / "trace.json"
    if not path.is_file():
        raise BadInput(f"{run} has no timeline ({path.name}): not a run folder, or a run from before the timeline")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: unreadable ({e})") from None


def step_spans(doc: dict) -> dict[str, dict[int, list[tuple[float, float]]]]:
    """case -> rank -> its timed ``step`` spans (start, end) in Unix seconds."""
    epoch = float(doc.get("otherData", {}).get("epoch_unix_s", 0.0))
    spans = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X" and e.get("tid", 0) < 100_000]
    cases = [e for e in spans if e.get("cat") == "case"]
    out: dict[str, dict[int, list[tuple[float, float]]]] = {}
    for e in spans:
        if e.get("cat") != "sample" or e.get("name") != "step":
            continue
        rank = e["tid"] - 1
        case = next(
            (
                c["name"]
                for c in cases
                if c["pid"] == e["pid"] and c["tid"] == e["tid"] and c["ts"] <= e["ts"] <= c["ts"] + c["dur"]
            ),
            None,
        )
        if case is not None:
            start = epoch + e["ts"] / 1e6
            out.setdefault(case, {}).setdefault(rank, []).append((start, start + e["dur"] / 1e6))
    return out


@functools.lru_cache(maxsize=4)
def _timeline_barriers(trace: Path) -> dict[tuple[str, int], list[float]]:
    """(case, rank) -> the ends of the barriers the timeline recorded in that case (Unix seconds, sorted)."""
    doc = read_timeline(trace.parent)
    epoch = float(doc.get("otherData", {}).get("epoch_unix_s", 0.0))
    evs = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X" and e.get("tid", 0) < 100_000]
    out: dict[tuple[str, int], list[float]] = {}
    for c in (e for e in evs if e.get("cat") == "case"):
        out[c["name"], c["tid"] - 1] = sorted(
            epoch + (e["ts"] + e.get("dur", 0.0)) / 1e6
            for e in evs
            if e.get("cat") == "op" and e.get("name") == "barrier" and e["tid"] == c["tid"] and e["pid"] == c["pid"]
            if c["ts"] <= e["ts"] <= c["ts"] + c["dur"]
        )
    return out


def clock_shift(recorded: list[float], profiled: list[float]) -> float:
    """What to add to the profile's times to put them on the timeline's clock: the median, over the profiled
    barriers, of the nearest recorded barrier's end less the profiled one's (0 where either has none)."""
    if not recorded or not profiled:
        return 0.0
    gaps = []
    for p in profiled:
        i = bisect.bisect_left(recorded, p)
        gaps.append(min((recorded[j] - p for j in (i - 1, i) if 0 <= j < len(recorded)), key=abs))
    return statistics.median(gaps)


def profile_ops(path: Path) -> list[tuple[str, float, float]]:
    """The backend's ops of one rank's profile: (op, start, end) in Unix seconds."""
    doc = json.loads(path.read_text())
    base = float(doc.get("baseTimeNanoseconds", 0)) / 1e9
    return [
        (e["name"].split(":", 1)[1], base + e["ts"] / 1e6, base + (e["ts"] + e.get("dur", 0.0)) / 1e6)
        for e in doc.get("traceEvents", [])
        if e.get("ph") == "X" and str(e.get("name", "")).startswith(OP_PREFIXES)
    ]


def recorded_step_s(run: Path, case: str) -> float | None:
    """The mean of the case's timed samples as the run's record holds them (``bench.json``, the samples the suite
    reports), seconds; None where the record has no such case."""
    try:
        doc = json.loads((run / "bench.json").read_text())
    except (OSError, ValueError):
        return None
    for b in doc.get("benchmarks") or []:
        samples = (b.get("extra_info") or {}).get("samples_us") or []
        if b.get("name") == case and samples:
            return sum(samples) / len(samples) / 1e6
    return None


_PEER = {op.name: op.peer for op in op_table.OPS if op.family == "send_recv"}
"""A point-to-point op's name -> the keyword of its peer (``dst``: it sends, ``src``: it receives)."""


def _p2p(op: str, rank: int, ranks: set[int]) -> str:
    """A send or recv named by its direction (``send 0->1`` matches ``recv 0->1`` on the peer), where the world
    of two ranks names the peer (the profile does not); any other op as it is."""
    if op not in _PEER or len(ranks) != 2:
        return op
    other = next(iter(ranks - {rank}))
    a, b = (rank, other) if _PEER[op] == "dst" else (other, rank)
    return f"p2p {a}->{b}"


def case_steps(run: Path, case: str, spans: dict[int, list[tuple[float, float]]]) -> list[list[RankStep]]:
    """The case's steps, each a RankStep per rank (the i-th step span of every rank), with the ops that started
    in the rank's span."""
    ops = {}
    for r in spans:
        path = run / "profiles" / f"{profile_name(case)}.rank{r}.json"
        if not path.is_file():
            raise BadInput(
                f"{run} has no profile of {case} on rank {r} ({path.name}): run it with PROFILE=1 "
                "(the timeline alone does not see the ops below torch.distributed's functions)"
            )
        mine = profile_ops(path)
        ends = [o[2] for o in mine if o[0] == "barrier"]
        shift = clock_shift(_timeline_barriers(run / "trace.json").get((case, r), []), ends)
        ops[r] = [(n, a + shift, b + shift) for n, a, b in mine]
    n = min(len(s) for s in spans.values())
    steps = []
    for i in range(n):
        step = []
        for r in sorted(spans):
            a, b = spans[r][i]
            mine = [(_p2p(o[0], r, set(spans)), o[1], o[2]) for o in ops[r] if a <= o[1] < b]
            step.append(RankStep(r, a, b, key_ops(mine)))
        steps.append(step)
    return steps
