"""Compute contention in the what-if: the share of a core a rank's compute had, and would have.

Where a host's ranks outnumber its cores, a compute segment's time is not its rank's alone: it is the CPU work
the rank did, stretched by how many ranks computed beside it. In a straggler run the other ranks compute while the
straggler sleeps or waits, with the cores to themselves, so their segments are shorter than in a run where every
rank computes at once. The model (``MODEL``):

- a rank is *busy* while its main thread runs an op the profiler records (``cpu_op``, the backend's ``c10d::``
  calls left out: they may only wait); between them it is idle (asleep, waiting, or Python between ops, which is
  not seen and is kept as measured);
- at any moment each busy rank gets ``min(1, cores / ranks busy at that moment)`` of a core; a segment's *work* is
  that share integrated over the rank's busy time in the segment, the CPU seconds it would take on a core of its
  own;
- the counterfactual prices that work at ``min(1, cores / n)`` for the ``n`` ranks it has computing at once, and
  keeps the segment's idle time: ``segment - busy + work / share(n)``.

Where the ranks do not outnumber the cores every share is 1 and nothing changes. Other processes on the host are
not counted (a loaded host's extra wait stays in the measured segments).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

MODEL = (
    "core share: a compute segment's busy time (its rank's profiled CPU ops) is CPU work at min(1, cores / ranks "
    "busy at once), priced at min(1, cores / ranks computing at once in the what-if); its idle time kept"
)
"""The model's name, as the record gives it."""

Intervals = list[tuple[float, float]]


def merge(intervals: Iterable[tuple[float, float]]) -> Intervals:
    """The union of ``intervals`` (a, b), sorted, overlapping and touching ones joined, empty ones dropped."""
    out: Intervals = []
    for a, b in sorted(iv for iv in intervals if iv[1] > iv[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def counts(busy: Mapping[int, Intervals]) -> list[tuple[float, float, int]]:
    """(a, b, n): the pieces of time in which ``n`` >= 1 ranks were busy (each rank's intervals merged)."""
    edges: list[tuple[float, int]] = []
    for ivs in busy.values():
        for a, b in merge(ivs):
            edges += [(a, 1), (b, -1)]
    edges.sort()
    out, n = [], 0
    for i, (t, d) in enumerate(edges):
        n += d
        nxt = edges[i + 1][0] if i + 1 < len(edges) else t
        if n > 0 and nxt > t:
            out.append((t, nxt, n))
    return out


def share(cores: float, n: int) -> float:
    """A busy rank's share of a core while ``n`` ranks are busy on ``cores``: at most 1."""
    return min(1.0, cores / n) if n > 0 else 1.0


def segment(
    a: float, b: float, mine: Intervals, pieces: list[tuple[float, float, int]], cores: float
) -> tuple[float, float]:
    """(busy seconds, work seconds) of a rank's segment [a, b]: ``mine`` its busy intervals (merged), ``pieces``
    every rank's (``counts``); work is each busy moment weighted by the rank's share of a core then."""
    busy = work = 0.0
    starts = [p[0] for p in pieces]
    i = max(0, bisect.bisect_right([iv[1] for iv in mine], a))
    for x, y in mine[i:]:
        if x >= b:
            break
        x, y = max(x, a), min(y, b)
        if y <= x:
            continue
        busy += y - x
        j = max(0, bisect.bisect_right(starts, x) - 1)
        for p, q, n in pieces[j:]:
            if p >= y:
                break
            lo, hi = max(p, x), min(q, y)
            if hi > lo:
                work += (hi - lo) * share(cores, n)
    return busy, work


def priced(gap: float, busy: float, work: float, cores: float, n: int) -> float:
    """A segment of ``gap`` seconds, ``busy`` of them busy doing ``work`` CPU seconds, with ``n`` ranks computing at
    once on ``cores``: its idle time kept, its work at that share."""
    return gap - busy + work / share(cores, n)


def attach(graphs: list, busy: Mapping[int, Intervals], cores: float, ranks: int) -> None:
    """Give each graph (graph.py ``Graph``) its segments' (busy, work) from the ranks' ``busy`` intervals on
    ``cores`` shared by ``ranks`` ranks (the most that compute at once in the what-if)."""
    mine = {r: merge(ivs) for r, ivs in busy.items()}
    pieces = counts(mine)
    for g in graphs:
        g.cpu = {rk: segment(a, b, mine.get(rk[0], []), pieces, cores) for rk, (a, b) in g.span.items()}
        g.cores, g.sharing = cores, ranks


__all__ = ["MODEL", "attach", "counts", "merge", "priced", "segment", "share"]
