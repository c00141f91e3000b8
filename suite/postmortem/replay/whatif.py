"""What-ifs on a case's step graphs (graph.py): the idealised step the ByteDance way, a rank k× slower at compute,
a link k× slower, and the slowdown's attribution (S, per op type, per worker M_W, per stage M_S).

Idealised (no straggler): each compute segment is the median of that segment across the ranks (ByteDance take the
mean, which keeps 1/n of one straggler's extra compute: half of it at two ranks), each transfer the median of that
op's transfers over the ranks and the case's steps, and the ranks start the step together. A
case's time is the mean over its steps (a slowdown that comes and goes counts by its share of the steps).

Where the run's ranks outnumbered a host's cores (cli.py ``contend``), the compute is priced with the share of a
core it would have (share.py, the core-share model): the idealised step's segments as if all the ranks computed at
once, a rank k× slower's added compute on a core of its own (it runs while the others wait). Elsewhere, and in
the replay as recorded, the segments are the measured ones.

A link k× slower stretches only the bandwidth term of the transfers that cross it (link.py: the α–β model).

N ranks instead of n (``ranks``), for a step whose every collective spans all its ranks (DDP's, FSDP2's on one
group): the idealised step, whose ranks are all alike, so that its replay at n ranks is its replay at N. Each
op's transfer takes the ring model's change from n to N ranks (link.py ``at_ranks``: its latency steps times α,
its bandwidth factor times S/β, from the run's α–β figure of its link). The compute stays each rank's own (the
per-rank batch is kept), except where the N ranks outnumber the host's cores: there each segment is the one a
probe run at N ranks measured, all of them computing at once (suite/model/contention.py: nothing measured at
fewer ranks tells how long a rank waits for a core), and without a probe the what-if says the contention is not
priced.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping

from suite.postmortem.replay import share
from suite.postmortem.replay.graph import END, Graph, Replay, replay
from suite.postmortem.replay.link import link_transfer

COMPUTE = "compute"
"""The op type of the compute segments (the others are the ops' names)."""
NO_SLOWDOWN = 0.01
"""Below this share of the step (T - T_ideal < 1% of T) there is no slowdown to attribute: M_W and M_S are None."""


@dataclasses.dataclass(frozen=True)
class WhatIf:
    """A change to replay: ``kind`` is ``ideal``, ``rank`` (``target`` the rank) or ``link`` (``target`` the pair
    of ranks); ``factor`` k: k times slower (compute for a rank, the link's bandwidth term for a link). ``wire``:
    a link's bandwidth term per op key, seconds (link.py; None: every transfer scaled whole)."""

    kind: str
    target: tuple[int, ...] = ()
    factor: float = 1.0
    wire: Mapping[tuple, float] | None = dataclasses.field(default=None, compare=False, hash=False)
    at: AtRanks | None = dataclasses.field(default=None, compare=False, hash=False)
    """``ranks``: how the step at N ranks is priced (link.py ``at_ranks``; None: not priced)."""

    def label(self) -> str:
        if self.kind == "ideal":
            return "no straggler (idealised)"
        if self.kind == "ranks":
            return f"{self.target[0]} ranks"
        what = f"rank {self.target[0]}" if self.kind == "rank" else f"link {self.target[0]}-{self.target[1]}"
        return f"{what} {self.factor:zg}x slower" if self.factor >= 1 else f"{what} {1 / self.factor:zg}x faster"


@dataclasses.dataclass(frozen=True)
class AtRanks:
    """The "N ranks" what-if's prices: op key -> seconds its transfer gains at N ranks (below 0: loses), and the
    compute segments of a probe at N ranks ((op key or END) -> seconds; None: each rank's own, the median)."""

    extra: Mapping[tuple, float]
    compute: Mapping[tuple, float] | None = None


def _p2p(k: tuple) -> bool:
    """Whether ``k`` is a send and its recv (``p2p a->b``): its two ranks run different code (a pipeline's stages)."""
    return k != END and str(k[0]).startswith("p2p ")


def median_transfers(graphs: list[Graph]) -> dict[tuple, float]:
    """Op key -> the median of its transfers over every rank and step; for a send and its recv, (key, rank) -> the
    median over the steps of that rank's (``_p2p``): the sender's transfer (its send's end less the later start)
    and the receiver's are not one quantity, and the median of both lengthened the shorter side."""
    seen: dict[tuple, list[float]] = {}
    for g in graphs:
        for (r, k), t in g.transfer.items():
            seen.setdefault((k, r) if _p2p(k) else k, []).append(t)
    return {k: statistics.median(v) for k, v in seen.items()}


def _med(med: Mapping[tuple, float], r: int, k: tuple) -> float:
    """Rank r's idealised transfer of op k (``median_transfers``)."""
    return med[k, r] if _p2p(k) else med[k]


def _staged(g: Graph) -> set[tuple]:
    """The segments of a pipeline's stages: those before a send or recv, and the tail of a graph that has one."""
    keys = {k for k in g.peers if _p2p(k)}
    return keys | {END} if keys else keys


def _stage_scale(g: Graph) -> dict[int, float]:
    """rank -> what its staged compute (``_staged``, as recorded) is scaled by in the ideal: a pipeline's stages
    run different layers, so no segment of one is another's, and a stage's compute is idealised whole. A stage
    above the median stage's total is brought down to it; the others are kept (1), as raising a faster stage to
    the median would lengthen the pipeline's critical path, which runs through every stage."""
    keys = _staged(g)
    total = {r: sum(max(0.0, g.gap[r, k]) for k in keys if (r, k) in g.gap) for r in g.ranks}
    mid = statistics.median(total.values()) if total else 0.0
    return {r: min(1.0, mid / t) if t > 0 else 1.0 for r, t in total.items()}


def _ideal_gap(g: Graph, k: tuple, shared: bool = False) -> float:
    """The segment's median across its ranks; ``shared``: each priced with all the ranks computing at once."""
    rs = g.ranks if k == END else g.peers[k]
    if shared:
        return statistics.median(_gap_at(g, r, k, min(len(g.ranks), g.sharing)) for r in rs)
    return statistics.median(g.gap[r, k] for r in rs)


def _gap_at(g: Graph, r: int, k: tuple, n: int) -> float:
    """Rank r's segment k with ``n`` ranks computing at once (share.py; as recorded where the graph has no
    contention to price: the ranks do not outnumber the cores)."""
    if not g.cpu:
        return g.gap[r, k]
    busy, work = g.cpu[r, k]
    return share.priced(g.gap[r, k], busy, work, g.cores, n)


def idealised(g: Graph, med: dict, ranks: Iterable[int] | None = None, types: Iterable[str] | None = None) -> float:
    """The step's time of ``ideal_replay``."""
    return ideal_replay(g, med, ranks, types).time


def ideal_replay(g: Graph, med: dict, ranks: Iterable[int] | None = None, types: Iterable[str] | None = None) -> Replay:
    """The step replayed with the segments and transfers of ``ranks`` (default all) and of op ``types`` (default
    all: ``COMPUTE`` and the ops' names) idealised; with every type, those ranks also start with the first rank."""
    ranks = set(g.ranks if ranks is None else ranks)
    types = None if types is None else set(types)
    staged, scale = _staged(g), _stage_scale(g)

    def gap(r: int, k: tuple) -> float:
        fix = r in ranks and (types is None or COMPUTE in types)
        if fix and k in staged:
            return g.gap[r, k] * scale[r]
        return _ideal_gap(g, k, shared=True) if fix else g.gap[r, k]

    def transfer(r: int, k: tuple) -> float:
        fix = r in ranks and (types is None or k[0] in types)
        return _med(med, r, k) if fix else g.transfer[r, k]

    return replay(g, gap, transfer, together=frozenset(ranks) if types is None else frozenset())


def changed(g: Graph, w: WhatIf, med: dict) -> float:
    """The step's time under the what-if ``w``."""
    if w.kind == "ideal":
        return idealised(g, med)
    if w.kind == "rank":
        # the added (or removed) compute runs while the others wait: on a core of its own (share.py)
        def slower(r: int, k: tuple) -> float:
            return g.gap[r, k] + (w.factor - 1) * _gap_at(g, r, k, 1) if r == w.target[0] else g.gap[r, k]

        return replay(g, gap=slower).time
    if w.kind == "link" and w.wire is None:
        return replay(g, transfer=lambda r, k: g.transfer[r, k] * w.factor).time
    if w.kind == "link":
        return replay(g, transfer=lambda r, k: link_transfer(g.transfer[r, k], w.wire.get(k, 0.0), w.factor)).time
    if w.kind == "ranks" and w.at is not None:
        at = w.at

        def gap(r: int, k: tuple) -> float:
            return at.compute[k] if at.compute is not None else _ideal_gap(g, k)

        return replay(g, gap, lambda r, k: max(0.0, _med(med, r, k) + at.extra.get(k, 0.0)), frozenset(g.ranks)).time
    raise ValueError(f"unknown what-if {w.kind!r}")


def spans_every_rank(graphs: list[Graph]) -> bool:
    """Whether every op of the steps ran on all their ranks (the "N ranks" what-if's steps)."""
    return all(sorted(rs) == list(g.ranks) for g in graphs for rs in g.peers.values())


def probe_compute(probe: list[Graph], keys: set[tuple]) -> dict[tuple, float] | None:
    """The compute segments of a probe run's steps (its ranks computing at once): per op key and END, the median
    across ranks, the mean over steps; None where the probe's ops are not the step's."""
    if not probe or any(set(g.peers) != keys for g in probe):
        return None
    return {k: _mean(_ideal_gap(g, k) for g in probe) for k in keys | {END}}


def _mean(values: Iterable[float]) -> float:
    return statistics.fmean(list(values))


def _share(t: float, t_fixed: float, t_ideal: float) -> float | None:
    """The part of the slowdown (t - t_ideal) that fixing something removes (t - t_fixed), in percent, within
    0..100: idealising one rank or stage alone can end below the whole idealisation (its transfers take the
    ops' medians, which the recorded ones of that rank may beat) or above the step, and a share of the slowdown
    is at most all of it and at least none."""
    if t - t_ideal < NO_SLOWDOWN * t:
        return None
    return round(min(100.0, max(0.0, 100.0 * (t - t_fixed) / (t - t_ideal))), 1)


def analyse(graphs: list[Graph], whatifs: list[WhatIf], stages: dict[int, list[int]] | None = None) -> dict:
    """A case's numbers (times in ms): measured and replayed step, the what-ifs, S, S per op type, M_W, M_S."""
    med = median_transfers(graphs)
    t = _mean(replay(g).time for g in graphs)
    t_ideal = _mean(idealised(g, med) for g in graphs)
    types = sorted({COMPUTE} | {k[0] for g in graphs for k in g.order})
    ranks = graphs[0].ranks
    measured = _mean(g.measured for g in graphs)
    out = {
        "steps": len(graphs),
        "measured_ms": round(measured * 1e3, 4),
        "replayed_ms": round(t * 1e3, 4),
        "replay_error_pct": round(100.0 * abs(t - measured) / measured, 2) if measured else None,
        "ideal_ms": round(t_ideal * 1e3, 4),
        "slowdown": round(t / t_ideal, 4) if t_ideal else None,
        "slowdown_by_op_type": {ty: round(t / _mean(idealised(g, med, types=[ty]) for g in graphs), 4) for ty in types},
        "M_W_pct": {str(r): _share(t, _mean(idealised(g, med, ranks=[r]) for g in graphs), t_ideal) for r in ranks},
        "M_S_pct": None,
        "whatifs": [],
    }
    if stages:
        out["M_S_pct"] = {
            str(s): _share(t, _mean(idealised(g, med, ranks=rs) for g in graphs), t_ideal)
            for s, rs in sorted(stages.items())
        }
    for w in whatifs:
        if w.kind == "ranks" and w.at is None:
            out["whatifs"].append({"what": w.label(), "step_ms": None, "vs_replayed": None})
            continue
        tw = _mean(changed(g, w, med) for g in graphs)
        out["whatifs"].append({"what": w.label(), "step_ms": round(tw * 1e3, 4), "vs_replayed": round(tw / t, 4)})
    return out


__all__ = ["COMPUTE", "END", "AtRanks", "WhatIf", "analyse", "changed", "ideal_replay", "idealised", "median_transfers"]
