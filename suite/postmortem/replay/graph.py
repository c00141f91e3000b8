"""One training step's dependency graph, rebuilt from its ranks' recorded ops, and its replay.

A step is, per rank, when it started and ended and the communication ops it ran (each with when it started and
ended on that rank). Ops are matched across ranks by their key. Where the run recorded each op's process group
and c10d sequence number (load.py: torch's flight recorder beside the profile), the key is the op's name, its place
among the step's ops of that name on that group in sequence order, and the group: an all_reduce of one group is
never matched with one of another group, whose peers differ, and an op's peers are the ranks of its group (a
send and its recv: one op, ``p2p <sender>-><receiver>``, whose peers are those two ranks). Where
it did not, the key is the op's name and its place among the ops of that name in the step, in the order the rank
started them (``Graph.matched_on`` says which). The graph holds, per rank:

- each op's *segment*: the compute between the op it waited for (the rank's latest op that had ended before this
  one started, or the step's start) and the op's start;
- the *tail*: the compute from the end of the rank's last op to the step's end (below 0 where the op ends after
  it: the profiler's and the timeline's clocks can differ by a little);

and per op and rank its *transfer*: the op's end on that rank less the latest start among its peers (the part of
the op that is not waiting for a late peer). Replaying puts each op's start on every rank at its predecessor's
end plus its segment, and its end at the latest peer's start plus the rank's transfer: a collective completes
when its last peer has arrived and moved the data. Unchanged, the replay reproduces the recorded times.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

END = ("step end", 0)
"""The key of a rank's tail segment (the step's end)."""


BY_GROUP = "process group and sequence number"
BY_NAME = "name and order (no process group recorded)"


@dataclasses.dataclass(frozen=True)
class Op:
    key: tuple
    """(name, index) matched on name and order; (name, index, "pg <name>") matched on group and sequence number."""
    start: float
    end: float
    group: tuple[int, ...] | None = None
    """The ranks of the op's process group, where it was recorded (None: not recorded)."""


@dataclasses.dataclass(frozen=True)
class RankStep:
    rank: int
    start: float
    end: float
    ops: tuple[Op, ...]


@dataclasses.dataclass
class Graph:
    ranks: tuple[int, ...]
    peers: dict[tuple, list[int]]
    """op key -> the ranks that ran it (a collective's group, checked against the group where it was recorded;
    two for a send and its recv)."""
    order: list[tuple]
    """The ops' keys, each after every op it can depend on."""
    pred: dict[tuple[int, tuple], tuple | None]
    """(rank, key or END) -> the key of the op it waits for on that rank (None: the step's start)."""
    gap: dict[tuple[int, tuple], float]
    """(rank, key or END) -> its segment's compute, seconds."""
    transfer: dict[tuple[int, tuple], float]
    """(rank, op key) -> end on that rank less the latest start among the op's peers, seconds."""
    offset: dict[int, float]
    """rank -> its step start after the earliest rank's."""
    measured: float
    """The step's recorded time: the last rank's end less the first rank's start."""
    matched_on: str = BY_NAME
    """How the ranks' ops were matched: BY_GROUP where every collective carried its group, else BY_NAME."""
    span: dict[tuple[int, tuple], tuple[float, float]] = dataclasses.field(default_factory=dict)
    """(rank, key or END) -> its segment's (start, end) as recorded, seconds."""
    cpu: dict[tuple[int, tuple], tuple[float, float]] = dataclasses.field(default_factory=dict)
    """(rank, key or END) -> its segment's (busy, work) seconds (share.py ``segment``); empty where the ranks do
    not outnumber the cores, or nothing says when they were busy: the segments are priced as recorded."""
    cores: float = 0.0
    """The cores the ranks shared where ``cpu`` is set."""
    sharing: int = 0
    """How many ranks shared them where ``cpu`` is set: the most that compute at once in a what-if."""


def key_ops(ops: list[tuple]) -> tuple[Op, ...]:
    """Ops keyed as the graph matches them. Each is (name, start, end) or (name, start, end, group) with group
    (process group name, c10d sequence number, the group's ranks) or None. With a group: (name, its index among
    the ops of that name on that group, in sequence order, "pg <group name>"); without: (name, its index among
    the ungrouped ops of that name, in start order)."""
    seen: dict[tuple, int] = {}
    keyed = []
    grouped = sorted((o for o in ops if len(o) > 3 and o[3] is not None), key=lambda o: (o[3][0], o[3][1]))
    for name, start, end, (pg, _, ranks) in grouped:
        i = seen.get((name, pg), 0)
        seen[name, pg] = i + 1
        keyed.append(Op((name, i, f"pg {pg}"), start, end, tuple(sorted(ranks))))
    plain = sorted((o[:3] for o in ops if len(o) < 4 or o[3] is None), key=lambda o: (o[1], o[2]))
    for name, start, end in plain:
        keyed.append(Op((name, seen.get(name, 0)), start, end))
        seen[name] = seen.get(name, 0) + 1
    return tuple(sorted(keyed, key=lambda o: (o.start, o.end)))


def _name(key: tuple) -> str:
    """An op's key as the user reads it: "all_reduce #0" or "all_reduce #0 of pg 1"."""
    return f"{key[0]} #{key[1]}" + (f" of {key[2]}" if len(key) > 2 else "")


def _pred(ops: tuple[Op, ...], t: float, own: tuple | None) -> Op | None:
    """The rank's op that ended last at or before ``t`` (other than ``own``)."""
    done = [o for o in ops if o.end <= t and o.key != own]
    return max(done, key=lambda o: o.end) if done else None


def build(steps: list[RankStep]) -> Graph:
    """The graph of one step; ValueError when the ranks did not run the same ops."""
    peers: dict[tuple, list[int]] = {}
    groups: dict[tuple, tuple[int, ...]] = {}
    for s in steps:
        for o in s.ops:
            peers.setdefault(o.key, []).append(s.rank)
            if o.group is not None:
                groups[o.key] = o.group
    for k, group in sorted(groups.items()):
        if tuple(sorted(peers[k])) != group:
            raise ValueError(f"op {_name(k)} ran on ranks {sorted(peers[k])} of its group's {list(group)}")
    alone = sorted(k for k, rs in peers.items() if len(rs) < 2 and k not in groups)
    if alone:
        raise ValueError(f"op {_name(alone[0])} ran on rank {peers[alone[0]][0]} alone")
    first = set(peers)
    t0 = min(s.start for s in steps)
    latest = {k: max(o.start for s in steps for o in s.ops if o.key == k) for k in first}
    pred, gap, transfer, span = {}, {}, {}, {}
    last_end: dict[tuple, float] = {}
    for s in steps:
        for o in s.ops:
            p = _pred(s.ops, o.start, o.key)
            pred[s.rank, o.key] = p.key if p else None
            gap[s.rank, o.key] = max(0.0, o.start - (p.end if p else s.start))
            span[s.rank, o.key] = (p.end if p else s.start, o.start)
            transfer[s.rank, o.key] = max(0.0, o.end - latest[o.key])
            last_end[o.key] = max(last_end.get(o.key, o.end), o.end)
        p = _pred(s.ops, float("inf"), None)  # the rank's last op, even one its clock ends just after the step
        pred[s.rank, END] = p.key if p else None
        gap[s.rank, END] = s.end - (p.end if p else s.start)  # below 0 where that op ends after the step
        span[s.rank, END] = (p.end if p else s.start, s.end)
    order = _topological(sorted(first, key=lambda k: (latest[k], last_end[k])), pred)
    return Graph(
        ranks=tuple(sorted(s.rank for s in steps)),
        peers=peers,
        order=order,
        pred=pred,
        gap=gap,
        transfer=transfer,
        offset={s.rank: s.start - t0 for s in steps},
        measured=max(s.end for s in steps) - t0,
        matched_on=BY_GROUP if groups and all(len(k) > 2 or k[0].startswith("p2p ") for k in peers) else BY_NAME,
        span=span,
    )


def _topological(keys: list[tuple], pred: dict) -> list[tuple]:
    """``keys`` (in recorded order) reordered so that each op follows the ops it waits for on any rank; a
    circle (clocks that disagree by more than an op) raises ValueError."""
    deps = {k: {p for (r, kk), p in pred.items() if kk == k and p is not None} for k in keys}
    out: list[tuple] = []
    placed: set[tuple] = set()
    while len(out) < len(keys):
        k = next((k for k in keys if k not in placed and deps[k] <= placed), None)
        if k is None:
            raise ValueError("the step's ops wait for each other in a circle")
        out.append(k)
        placed.add(k)
    return out


@dataclasses.dataclass
class Replay:
    time: float
    """The step's time: the last rank's end less the first rank's start, seconds."""
    start: dict[tuple[int, tuple], float]
    """(rank, key) -> when the op started on that rank (END: the rank's step start)."""
    end: dict[tuple[int, tuple], float]
    """(rank, key) -> when the op ended on that rank (END: the rank's step end)."""


Gap = Callable[[int, tuple], float]
Transfer = Callable[[int, tuple], float]


def replay(
    g: Graph, gap: Gap | None = None, transfer: Transfer | None = None, together: frozenset[int] = frozenset()
) -> Replay:
    """The step replayed with the segments ``gap(rank, key)`` and transfers ``transfer(rank, key)`` (default: as
    recorded); the ranks in ``together`` start with the first rank (their recorded lateness left out)."""
    gap = gap or (lambda r, k: g.gap[r, k])
    transfer = transfer or (lambda r, k: g.transfer[r, k])
    start = {(r, END): (0.0 if r in together else g.offset[r]) for r in g.ranks}
    end: dict[tuple[int, tuple], float] = {}

    def ready(r: int, k: tuple) -> float:
        p = g.pred[r, k]
        return (start[r, END] if p is None else end[r, p]) + gap(r, k)

    for k in g.order:
        arrive = {r: ready(r, k) for r in g.peers[k]}
        latest = max(arrive.values())
        for r in g.peers[k]:
            start[r, k] = arrive[r]
            end[r, k] = max(arrive[r], latest + transfer(r, k))
    ends = {r: ready(r, END) for r in g.ranks}
    t0 = min(start[r, END] for r in g.ranks)
    out_end = dict(end)
    for r in g.ranks:
        out_end[r, END] = ends[r]
    return Replay(time=max(ends.values()) - t0, start=start, end=out_end)
