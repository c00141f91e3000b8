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

Process groups: the profiler's ``gloo:`` ops name no process group nor sequence number (torch 2.13 records no
``record_param_comms`` metadata on Gloo), so a profiled run keeps, per case and rank, the collectives torch's flight
recorder saw issued (``<run>/profiles/c10d/<case>.rank<r>.json``: group, c10d sequence number, op, in issue order,
and each group's ranks; suite/harness/profiling.py). A group's
ops run on its own worker threads, first issued first started (Gloo's queue), so ``assign_groups`` gives each
profiled op its group and sequence number: each thread takes the group the ops it ran mostly belong to (the i-th
op of a name the i-th issued of that name; a tie places none), then a group's ops in start order take its sequence
numbers in order, their names checked. Where any rank's ops cannot all be placed so (no record, a count or a name
that differs), the case's ops are matched on their names (graph.py ``BY_NAME``).

Sends and recvs: Gloo's flight recorder keeps no entry of them (torch 2.13: its entries' ``op_id`` skips their
numbers), so the same file holds the ones the rank issued (``sends``: group, sequence number, sender, receiver;
suite/harness/c10d.py ``p2p_calls``), and ``assign_p2p`` gives the rank's i-th profiled send or recv the i-th
noted one: a send and its recv become one op, ``p2p <sender>-><receiver>``, of that group, its peers the two ranks.
"""

from __future__ import annotations

import bisect
import collections
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


SHIFT_AGREE_S = 1e-3
"""Gaps to the nearest barrier within this of each other are one clock shift (``clock_shift``)."""


def clock_shift(recorded: list[float], profiled: list[float]) -> float:
    """What to add to the profile's times to put them on the timeline's clock (0 where either has no barrier): per
    profiled barrier, the nearest recorded barrier's end less its own; the median of the largest set of these
    gaps that agree within SHIFT_AGREE_S (all of them where no two agree). The timeline can hold fewer barriers
    than the profile (a rank's record of a case cut short: the middle rank of a 3-rank pipeline kept 7 of its 20
    on the compose simulation), and the profiled barriers past its last are nearest to that one, each by a
    different gap: the median of every gap was then a shift of 0.28 s, which put the rank's ops in other steps."""
    if not recorded or not profiled:
        return 0.0
    gaps = []
    for p in profiled:
        i = bisect.bisect_left(recorded, p)
        gaps.append(min((recorded[j] - p for j in (i - 1, i) if 0 <= j < len(recorded)), key=abs))
    gaps.sort()
    best = max(
        (gaps[bisect.bisect_left(gaps, g) : bisect.bisect_right(gaps, g + SHIFT_AGREE_S)] for g in gaps), key=len
    )
    return statistics.median(best if len(best) > 1 else gaps)


def profile_events(path: Path) -> tuple[list[tuple[str, float, float, int]], dict[str, tuple[int, ...]]]:
    """The backend's ops of one rank's profile, (op, start, end, thread) in Unix seconds, and its process groups
    (group name -> its ranks, from ``distributedInfo.pg_config``: some of the groups the rank is in)."""
    doc = json.loads(path.read_text())
    info = doc.get("distributedInfo") or {}
    groups = {str(g.get("pg_name")): tuple(int(r) for r in g.get("ranks") or []) for g in info.get("pg_config") or []}
    return _backend_ops(doc), groups


def _backend_ops(doc: dict) -> list[tuple[str, float, float, int]]:
    """A profile's backend ops (any backend of OP_PREFIXES), (op, start, end, thread) in Unix seconds."""
    base = float(doc.get("baseTimeNanoseconds", 0)) / 1e9
    return [
        (e["name"].split(":", 1)[1], base + e["ts"] / 1e6, base + (e["ts"] + e.get("dur", 0.0)) / 1e6, e.get("tid", 0))
        for e in doc.get("traceEvents", [])
        if e.get("ph") == "X" and str(e.get("name", "")).startswith(OP_PREFIXES)
    ]


def busy_intervals(run: Path, case: str, ranks: list[int]) -> dict[int, list[tuple[float, float]]]:
    """rank -> when its main thread (the one that ran the most ops) ran an op the profiler records (``cpu_op``,
    the ``c10d::`` calls left out: they may only wait), each (start, end) on the timeline's clock; nothing for a
    rank without a profile. The ops' union is share.py's busy time."""
    out: dict[int, list[tuple[float, float]]] = {}
    recorded: dict | None = None  # the timeline's barriers, read once, where a rank has a profile
    for r in ranks:
        path = run / "profiles" / f"{profile_name(case)}.rank{r}.json"
        if not path.is_file():
            continue
        doc = json.loads(path.read_text())
        base = float(doc.get("baseTimeNanoseconds", 0)) / 1e9
        evs = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X"]
        cpu = [e for e in evs if e.get("cat") == "cpu_op" and not str(e.get("name", "")).startswith("c10d::")]
        if not cpu:
            continue
        main = collections.Counter(e.get("tid") for e in cpu).most_common(1)[0][0]
        recorded = _timeline_barriers(run / "trace.json") if recorded is None else recorded
        ends = sorted(o[2] for o in _backend_ops(doc) if o[0] == "barrier")  # as replay_steps aligns the ops
        shift = clock_shift(recorded.get((case, r), []), ends)
        out[r] = [
            (base + e["ts"] / 1e6 + shift, base + (e["ts"] + e.get("dur", 0.0)) / 1e6 + shift)
            for e in cpu
            if e.get("tid") == main
        ]
    return out


def read_c10d_ops(path: Path) -> tuple[list[dict], list[dict], dict[str, tuple[int, ...]]]:
    """A rank's recorded collectives of a case (suite/harness/profiling.py ``c10d_ops``), its sends and recvs in
    issue order (``sends``: suite/harness/c10d.py ``p2p_calls``) and its groups' ranks (group name -> ranks);
    ([], [], {}) where none were recorded."""
    try:
        doc = json.loads(path.read_text())
        groups = {str(k): tuple(int(r) for r in v) for k, v in (doc.get("groups") or {}).items()}
        return list(doc.get("ops") or []), list(doc.get("sends") or []), groups
    except (OSError, ValueError, TypeError, AttributeError):
        return [], [], {}


def assign_groups(
    ops: list[tuple[str, float, float, int]], issued: list[dict], groups: dict[str, tuple[int, ...]]
) -> list[tuple[str, int, tuple[int, ...]] | None] | None:
    """Each profiled op's (group, sequence number, the group's ranks), None for a send or recv (they have their
    own counter); None in all where the record does not account for every collective (see the module's doc)."""
    coll = [i for i, o in enumerate(ops) if o[0] not in _PEER]
    if not issued or any(str(e["pg"]) not in groups for e in issued):
        return None
    if collections.Counter(ops[i][0] for i in coll) != collections.Counter(e["op"] for e in issued):
        return None
    by_start = sorted(coll, key=lambda i: (ops[i][1], ops[i][2]))
    votes: dict[int, collections.Counter] = {}
    for name in {e["op"] for e in issued}:
        mine = [i for i in by_start if ops[i][0] == name]
        theirs = sorted((e for e in issued if e["op"] == name), key=lambda e: e["issued_ns"])
        for i, e in zip(mine, theirs):
            votes.setdefault(ops[i][3], collections.Counter())[str(e["pg"])] += 1
    if any(len(c) > 1 and c.most_common(2)[0][1] == c.most_common(2)[1][1] for c in votes.values()):
        return None  # a thread taken as often for one group as for another: no group can be told
    thread_pg = {t: c.most_common(1)[0][0] for t, c in votes.items()}
    out: list[tuple[str, int, tuple[int, ...]] | None] = [None] * len(ops)
    for pg in {str(e["pg"]) for e in issued}:
        mine = [i for i in by_start if thread_pg[ops[i][3]] == pg]
        theirs = sorted((e for e in issued if str(e["pg"]) == pg), key=lambda e: e["seq"])
        if [ops[i][0] for i in mine] != [e["op"] for e in theirs]:
            return None
        for i, e in zip(mine, theirs):
            out[i] = (pg, int(e["seq"]), groups[pg])
    return out


def assign_p2p(
    ops: list[tuple[str, float, float, int]], calls: list[dict]
) -> list[tuple[str, tuple[str, int, tuple[int, int]]] | None] | None:
    """Each profiled send or recv's name by its direction (``p2p 0->1`` on the sender and on the receiver) and its
    (group, sequence number, (sender, receiver)), None for every other op: the rank's i-th send or recv in start
    order is its i-th recorded one (``calls``, in issue order: a rank issues its sends and recvs from one thread,
    and the profile records each on the thread that issued it). None in all where the record does not account
    for every one (a count or a kind that differs)."""
    mine = sorted((i for i, o in enumerate(ops) if o[0] in _PEER), key=lambda i: (ops[i][1], ops[i][2]))
    if len(mine) != len(calls):
        return None
    out: list[tuple[str, tuple[str, int, tuple[int, int]]] | None] = [None] * len(ops)
    for i, c in zip(mine, calls):
        if ("send" if _PEER[ops[i][0]] == "dst" else "recv") != c.get("op"):
            return None
        src, dst = int(c["src"]), int(c["dst"])
        out[i] = (f"p2p {src}->{dst}", (str(c["pg"]), int(c["seq"]), (src, dst)))
    return out


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


def _steps_of(ops: dict[int, list[tuple]], spans: dict[int, list[tuple[float, float]]]) -> dict[int, list[int | None]]:
    """rank -> the step each of its ops (name, start, end, group or None) belongs to: the one whose span it started
    in (None: none). An op placed in its group (the case's k-th op of that name on that group is one op on every
    rank) is in one step on all of the group's ranks: the one most of them started it in, a step rather than none
    where as many did. The profile's clock, put onto the timeline's, can be off by a little, and a rank's last
    send of a step can be issued microseconds before the step ends (its recv inside the step on the other rank),
    or the barrier after the timed steps can start just before the last step's end on one rank."""
    out: dict[int, list[int | None]] = {}
    case_key: dict[int, list[tuple | None]] = {}
    votes: dict[tuple, collections.Counter] = {}
    for r, mine in ops.items():
        out[r] = [next((i for i, (a, b) in enumerate(spans[r]) if a <= o[1] < b), None) for o in mine]
        seen: dict[tuple, int] = {}
        case_key[r] = [None] * len(mine)
        grouped = (j for j, o in enumerate(mine) if len(o) > 3 and o[3] is not None)
        for j in sorted(grouped, key=lambda j: mine[j][3][:2]):
            k = (mine[j][0], mine[j][3][0])
            case_key[r][j] = (*k, seen.get(k, 0))
            seen[k] = seen.get(k, 0) + 1
            votes.setdefault(case_key[r][j], collections.Counter())[out[r][j]] += 1
    step: dict[tuple, int | None] = {}
    for key, c in votes.items():
        most = max(c.values())
        tied = [s for s, n in c.items() if n == most]
        if len(tied) == 1 or (len(tied) == 2 and None in tied):
            step[key] = next(s for s in tied if s is not None) if len(tied) == 2 else tied[0]
    for r in ops:
        for j, key in enumerate(case_key[r]):
            if key in step:
                out[r][j] = step[key]
    return out


def case_steps(run: Path, case: str, spans: dict[int, list[tuple[float, float]]]) -> list[list[RankStep]]:
    """The case's steps, each a RankStep per rank (the i-th step span of every rank), with the ops that started
    in the rank's span (or, placed in their group, in the step on its other ranks: ``_steps_of``): each collective
    with its group and sequence number where every rank's record places them (``assign_groups``), else none of
    them; each send and recv with its group, sequence number and direction where every rank's record places them
    (``assign_p2p``), else named by direction in a world of two (``_p2p``) and by name in a larger one."""
    ops, placed, sent = {}, {}, {}
    for r in spans:
        path = run / "profiles" / f"{profile_name(case)}.rank{r}.json"
        if not path.is_file():
            raise BadInput(
                f"{run} has no profile of {case} on rank {r} ({path.name}): run it with PROFILE=1 "
                "(the timeline alone does not see the ops below torch.distributed's functions)"
            )
        mine, groups = profile_events(path)
        ends = [o[2] for o in mine if o[0] == "barrier"]
        shift = clock_shift(_timeline_barriers(run / "trace.json").get((case, r), []), ends)
        ops[r] = [(n, a + shift, b + shift) for n, a, b, _ in mine]
        issued, calls, recorded = read_c10d_ops(run / "profiles" / "c10d" / path.name)
        placed[r] = assign_groups(mine, issued, {**groups, **recorded}) if issued else None
        sent[r] = assign_p2p(mine, calls)
    if any(p is None for p in placed.values()):
        placed = {r: [None] * len(ops[r]) for r in spans}
    if any(p is None for p in sent.values()):
        sent = {r: [None] * len(ops[r]) for r in spans}
    n = min(len(s) for s in spans.values())
    named = {
        r: [
            (p[0], o[1], o[2], p[1]) if p is not None else (_p2p(o[0], r, set(spans)), o[1], o[2], g)
            for o, g, p in zip(ops[r], placed[r], sent[r])
        ]
        for r in spans
    }
    at = _steps_of(named, {r: spans[r][:n] for r in spans})
    steps = []
    for i in range(n):
        step = []
        for r in sorted(spans):
            a, b = spans[r][i]
            step.append(RankStep(r, a, b, key_ops([o for o, s in zip(named[r], at[r]) if s == i])))
        steps.append(step)
    return steps
