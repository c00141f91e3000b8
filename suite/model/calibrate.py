"""Predict at scale: the time of every collective, and of a DDP step, at N ranks from a small run.

Reads stored runs only (bench.json); measures nothing.

    python -m suite.model RUN --ranks 1024 --ranks-per-node 8 [--sizes 1M,64M]
        the extrapolation table; writes RUN/predict.json (atomically)
    python -m suite.model validate --fit RUN,RUN --check RUN,RUN [--out FILE]
        fit on some runs (e.g. 2 and 3 compose nodes), predict the others' sizes (4, 5, 6 nodes),
        print predicted / measured / error per op and size and the geomean |error| per op

**Link classes.** Ranks sit ``ranks_per_node`` to a node, node by node (torchrun's numbering).
A message between two ranks of one node crosses an *intra*-node link, between nodes an
*inter*-node link; each class has its own Hockney α–β (suite/model/fit.py). Inter-node flows that
leave (or enter) one node at the same time share its link: f flows of b bytes cost α + f·b/β.

**Models** (S = nccl-tests' buffer size of the op, suite/metrics.py; n ranks, P per node,
m = n/P nodes; one class written α, β; with two classes every step costs what its slowest
class costs). Each is a sum of ``Term`` s (α count and bytes over one β, per link class):

- ``ring`` — Thakur, Rabenseifner, Gropp, "Optimization of Collective Communication Operations
  in MPICH", IJHPCA 2005 (ring all_gather, reduce_scatter = ring reduce-scatter, all_reduce =
  reduce-scatter + all-gather, Patarasuk & Yuan JPDC 2009) and the pipelined chain broadcast
  (Chan et al., "Collective communication: theory, practice, and experience", CCPE 2007; NCCL's
  ring broadcast). The coefficients are suite.model.fit's ring model (``fit.ring_coefficients``:
  all_reduce 2(n−1)α + 2(n−1)/n·S/β; all_gather, reduce_scatter (n−1)α + (n−1)/n·S/β; broadcast
  (n−1)α + S/β); node-contiguous ring order puts one flow on each node's link.
- ``pairwise`` (all_to_all) — n−1 shifted exchanges of S/n (Thakur et al. 2005 §all-to-all;
  suite.model.fit's all_to_all line): (n−1)α + (n−1)/n·S/β on one link; with P ranks per node the step
  of shift k puts min(k, n−k, P) flows on a node's link.
- ``tree`` — broadcast: binomial tree, ⌈log2 n⌉ rounds of the whole buffer, ⌈log2 n⌉(α + S/β)
  (Chan et al. 2007 "MST broadcast"; Thakur et al. 2005 short-message broadcast); all_reduce:
  NCCL's pipelined double binary tree, 2((P−1)α_intra + ⌊log2 m⌋α_inter) + 2·S/β (NCCL
  src/graph/tuning.cc ``ncclTopoTuneModel``: tree latency 2·((nRanks/nNodes−1)·intraLat +
  log2i(nNodes)·interLat), algbw = busBw × 0.5; Sanders, Speck, Träff, "Two-tree algorithms for
  full bandwidth broadcast, reduction and scan", Parallel Computing 2009); barrier: gather +
  release over a binomial tree, 2⌈log2 n⌉α.
- ``halving_doubling`` — recursive halving / doubling (Thakur et al. 2005; Rabenseifner, ICCS
  2004): all_reduce = reduce-scatter by recursive halving + all-gather by recursive doubling,
  2·log2 n·α + 2(n−1)/n·S/β; all_gather (recursive doubling) and reduce_scatter (recursive
  halving) log2 n·α + (n−1)/n·S/β; broadcast = binomial scatter + recursive-doubling all-gather
  (van de Geijn), 2·log2 n·α + 2(n−1)/n·S/β. For n not a power of two the extra ranks first fold
  into the largest power of two below n and are answered after it (Thakur et al. 2005 §4): one
  step of the whole buffer each way. Partners at distance ≥ P are on other nodes, all P ranks of
  a node at once: the node link carries P flows.
- ``hierarchical`` — intra + inter (two-level; the 2D ring of hierarchical all-reduce, e.g.
  Horovod's and NCCL's intra-node/inter-node split): all_reduce = intra reduce-scatter ring
  ((P−1)α_i + (P−1)/P·S/β_i), P concurrent inter all_reduce rings of S/P (2(m−1)α_e +
  2(m−1)/m·S/β_e on the node link), intra all-gather ring; all_gather = inter then intra ring,
  reduce_scatter = intra then inter ring; broadcast = chain over the nodes then within each.
  (suite/algorithms.py's hierarchical_all_reduce is the reduce → leaders → broadcast variant.)
- ``posted_tree`` (broadcast) — Gloo's binomial tree as gloo/broadcast.cc runs it: a rank that has
  the data posts the sends to all its children at once, so they share its link; with one rank per
  node its c children finish α + c·S/β after it (the path 0 → 1 → 3 → 7 … costs (log2 n) + … + 1
  times S/β: 3 S/β at 4 ranks where round-by-round rounds take 2), with several ranks per node a
  fluid simulation of the shared node links.
- ``allreduce_slice`` (reduce_scatter) — an all_reduce of the whole S (ring), then each rank
  copies its chunk out: what torch's ProcessGroupGloo does for reduce_scatter_tensor.
- ``dissemination`` (barrier) — ⌈log2 n⌉ rounds, rank r signals r + 2^k (Hensgen, Finkel,
  Manber, "Two algorithms for barrier synchronization", IJPP 1988).

The **bottleneck** of a prediction is its largest single component: the α or the β part of
one link class ("bandwidth-bound, inter-node" ...).

**Which algorithm the backend runs** is found out (``backend_algorithm``), never taken for
granted: Gloo's choice per op is read from its sources (the ``GLOO`` table, each entry citing
the file) and *checked* against the run (``check_algorithms``: every candidate fitted to the
measured (n, S) points; with two or more world sizes the n-scaling tells them apart); NCCL's
from ``NCCL_ALGO`` (records carry ``nccl_algo``) and from its debug lines ("AllReduce: 4096 Bytes
-> Algo Tree proto LL ..." with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING, in a record's
``nccl_debug`` or in RUN/*.log). The predictions of that algorithm are marked.

**Link parameters** (``run_links``): per class from the run's point-to-point records (ping-pong
and pair-matrix ``send_recv``, each pair classified by its two ranks' hosts), α–β fitted with
suite.model.fit.fit_model (bootstrap 95% intervals); and per op, the link that makes the backend's
algorithm reproduce that op's own measured series (``calibrate``: the implied link of
suite.model.fit.implied_link, generalised to any algorithm and to several world sizes; the same
weighted fit and bootstrap, on per-step time against per-step bytes). An op is predicted over
its own calibrated link; ops the run did not measure over the point-to-point link, else the
median of the calibrated ones. A class the run never crossed (a one-host run has no inter-node
link) is taken equal to the other, and the output says so. The interval of a predicted time is
the model at the slow and fast ends of the links' intervals (time grows with α and falls with
β, so these bound it).

**DDP step at N** (``predict_ddp``): compute = the no-op-hook DDP step measured in the run (DDP's
whole machinery, no communication); communication = the all_reduce model over the buckets DDP
built (``bucket_sizes``, one after another); hidden = the share of the gradient all_reduce the
run hid (``overlap_saved_ms / allreduce_ms``, clamped to [0, 1]) of the modelled communication, at
most the backward compute it can hide under; step = compute + communication − hidden; scaling
efficiency = t(solo step) / step (per-rank batch fixed, as the ddp experiment defines it).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from suite import metrics
from suite.model import fit

CLASSES = ("intra", "inter")
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "barrier")
FIT_VARIANTS = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather_into_tensor",
    "reduce_scatter": "reduce_scatter_tensor",
    "broadcast": "broadcast",
    "all_to_all": "all_to_all_single",
    "barrier": "barrier",
}
"""The form of each op whose records are fitted (the tensor forms nccl-tests and FSDP use; the
collectives experiment measures the list forms too, with different costs on Gloo)."""
MAX_RANKS = 1 << 20


# --- links and topology --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ClassLink:
    """α–β of one link class. With a knee (suite.model.fit.find_knee on per-step message bytes, e.g. a
    token bucket's burst or an eager/rendezvous switch) messages below ``knee_bytes`` use ``small``."""

    link_class: str
    alpha_us: float
    beta_gbps: float
    alpha_ci_us: tuple[float, float] | None = None
    beta_ci_gbps: tuple[float, float] | None = None
    knee_bytes: float | None = None
    small: tuple[float, float] | None = None
    """(α µs, β GB/s) of messages below the knee."""
    burst_bytes: float = 0.0
    """Bytes a token-bucket shaper (tc tbf's burst, as LINK_RATE sets it) lets through at once before it
    limits the rate: the first burst_bytes an op puts on this class cost no β time, once per op (0 on a
    link without a shaper). Fitted by ``calibrate`` where it explains the measurements."""
    source: str = ""

    def params(self, msg_bytes: float) -> tuple[float, float]:
        if self.small is not None and self.knee_bytes is not None and msg_bytes < self.knee_bytes:
            return self.small
        return self.alpha_us, self.beta_gbps

    def end(self, which: str) -> ClassLink:
        """The slow ("hi": α high, β low) or fast ("lo") end of the intervals (itself without them)."""
        a = self.alpha_ci_us[1 if which == "hi" else 0] if self.alpha_ci_us else self.alpha_us
        b = self.beta_ci_gbps[0 if which == "hi" else 1] if self.beta_ci_gbps else self.beta_gbps
        return dataclasses.replace(self, alpha_us=max(a, 0.0), beta_gbps=b if b > 0 else self.beta_gbps)

    def as_dict(self) -> dict:
        return {
            "link_class": self.link_class,
            "alpha_us": self.alpha_us,
            "beta_gbps": _num(self.beta_gbps),
            "alpha_ci_us": self.alpha_ci_us and [_num(x) for x in self.alpha_ci_us],
            "beta_ci_gbps": self.beta_ci_gbps and [_num(x) for x in self.beta_ci_gbps],
            "knee_bytes": self.knee_bytes,
            "small": self.small and [_num(x) for x in self.small],
            "burst_bytes": self.burst_bytes,
            "source": self.source,
        }


Links = Mapping[str, ClassLink]


@dataclass(frozen=True)
class Topology:
    ranks: int
    ranks_per_node: int

    def __post_init__(self):
        if self.ranks < 1 or self.ranks_per_node < 1 or self.ranks % self.ranks_per_node:
            raise ValueError(f"{self.ranks_per_node} ranks per node does not divide {self.ranks} ranks")

    @property
    def nodes(self) -> int:
        return self.ranks // self.ranks_per_node

    def classes(self) -> tuple[str, ...]:
        return tuple(c for c, on in (("intra", self.ranks_per_node > 1), ("inter", self.nodes > 1)) if on)


@dataclass(frozen=True)
class Term:
    """A part of the critical path on one link class: ``alphas`` start-ups and ``bytes`` through
    one β of that class, in messages of ``msg_bytes`` (which piece of a kneed link applies)."""

    link_class: str
    alphas: float
    bytes: float
    msg_bytes: float
    bursts: int = 1
    """How many senders on the path start with an idle link (a shaper's full burst): 1 where every rank
    sends from the start (ring, halving/doubling), one per hop where each hop's sender starts when it
    receives (Gloo's posted-sends tree)."""

    def parts_us(self, links: Links) -> tuple[float, float]:
        a, b = links[self.link_class].params(self.msg_bytes)
        return self.alphas * a, (0.0 if math.isinf(b) else self.bytes / (b * 1e3))

    def time_us(self, links: Links) -> float:
        return sum(self.parts_us(links))


def _slowest(cands: Sequence[Term], links: Links) -> list[Term]:
    """One synchronous step (or steps) on every class at once: it lasts as long as its slowest class."""
    cands = [t for t in cands if t is not None]
    return [max(cands, key=lambda t: t.time_us(links))] if cands else []


def _flows(topo: Topology, src: np.ndarray, dst: np.ndarray) -> tuple[bool, int]:
    """(some pair is on one node, the most flows one node's link carries in either direction)."""
    p = topo.ranks_per_node
    sn, dn = src // p, dst // p
    cross = sn != dn
    inter = 0
    if cross.any():
        inter = int(max(np.bincount(sn[cross]).max(), np.bincount(dn[cross]).max()))
    return bool((~cross).any()), inter


def _step(topo: Topology, alphas: float, msg: float, flows: tuple[bool, int]) -> list[Term]:
    intra, inter = flows
    return [
        Term("intra", alphas, alphas * msg, msg) if intra else None,
        Term("inter", alphas, alphas * msg * inter, msg) if inter else None,
    ]


def _pow2_below(n: int) -> int:
    return 1 << (n.bit_length() - 1)


# --- the algorithms: op -> Terms ----------------------------------------------------------------


def _ring(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    c = fit.ring_coefficients(op, topo.ranks)
    if c is None or op not in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        return None
    a, b = c
    msg = b * s / a  # one step's message: S/n (the chain broadcast: S in n-1 pipelined segments)
    return _slowest([Term(k, a, b * s, msg) for k in topo.classes()], links)


def _pairwise(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    if op != "all_to_all" or topo.ranks < 2:
        return None
    n, p = topo.ranks, topo.ranks_per_node
    msg = s / n
    out = []
    k = np.arange(1, n)
    dist = np.minimum(k, n - k)
    inter = np.minimum(dist, p) if topo.nodes > 1 else np.zeros_like(k)
    intra = dist < p
    # steps with the same (intra, inter) flows are alike: group them
    for has_intra, f in sorted(set(zip(intra.tolist(), inter.tolist()))):
        count = int(np.sum((intra == has_intra) & (inter == f)))
        out += _slowest(_step(topo, count, msg, (has_intra, f)), links)
    return out


def _binomial_rounds(topo: Topology) -> list[tuple[bool, int]]:
    """Flows of each round of a binomial tree from rank 0 (round with distance d: ranks < d send to rank + d)."""
    n, out, d = topo.ranks, [], 1
    while d < n:
        src = np.arange(min(d, n - d))
        out.append(_flows(topo, src, src + d))
        d *= 2
    return out


SIM_MAX_RANKS = 16384
"""The posted-sends broadcast with several ranks per node is a fluid simulation; beyond this many ranks it
is not run (one rank per node has a closed recursion at any size)."""


def _children(v: int, n: int) -> list[int]:
    """Gloo's binomial children of virtual rank v (gloo/broadcast.cc): v + 2^j for 2^j above v's top bit."""
    j = v.bit_length()
    out = []
    while v + (1 << j) < n:
        out.append(v + (1 << j))
        j += 1
    return out


def _posted_tree(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    """Broadcast over Gloo's binomial tree as Gloo runs it: a rank posts *all* its sends the moment it has
    the data (gloo/broadcast.cc waits for its sends only at the end), so they share its link: with c
    children each gets β/c. One rank per node: rank v's children all finish at R(v) + α + c(v)·S/β,
    a recursion down the tree; several per node: a fluid simulation in which every node's link is shared
    equally by the flows leaving (and entering) it. The critical path is the latest leaf's."""
    n, p = topo.ranks, topo.ranks_per_node
    if op != "broadcast" or n < 2 or (p > 1 and n > SIM_MAX_RANKS):
        return None
    cls = "inter" if topo.nodes > 1 else "intra"
    if p == 1 or topo.nodes == 1:
        a, b = links[cls].params(s)
        unit = 0.0 if math.isinf(b) else s / (b * 1e3)
        hops, units = [0] * n, [0] * n
        for v in range(n):
            kids = _children(v, n)
            for k in kids:
                hops[k], units[k] = hops[v] + 1, units[v] + len(kids)
        last = max(range(n), key=lambda v: hops[v] * a + units[v] * unit)
        return [Term(cls, hops[last], units[last] * s, s, bursts=max(hops[last], 1))]
    return _posted_tree_sim(topo, links, s)


def _posted_tree_sim(topo: Topology, links: Links, s: float) -> list[Term]:
    n, p = topo.ranks, topo.ranks_per_node
    node = [r // p for r in range(n)]
    have = {0: (0.0, {"intra": [0, 0.0], "inter": [0, 0.0]})}  # rank -> (time it has the data, path tally)
    pending = []  # (start time, src, dst): flows whose α has not elapsed
    for k in _children(0, n):
        c = "intra" if node[k] == node[0] else "inter"
        pending.append((links[c].params(s)[0], 0, k))
    active = {}  # dst -> [src, class, bytes left, started]
    now = 0.0
    for _ in range(20 * n):  # every event starts or ends a flow: n-1 of each (a guard, never reached)
        if not (pending or active):
            break
        ego, ing = {}, {}
        for d, (src, c, _, _) in active.items():
            if c == "inter":
                ego[node[src]] = ego.get(node[src], 0) + 1
                ing[node[d]] = ing.get(node[d], 0) + 1
        rate = {}
        for d, (src, c, _, _) in active.items():
            b = links[c].params(s)[1] * 1e3  # bytes per µs
            share = (
                max(ego[node[src]], ing[node[d]])
                if c == "inter"
                else sum(1 for x in active.values() if x[0] == src and x[1] == "intra")
            )
            rate[d] = b / share
        t_done = min((now + (0.0 if math.isinf(rate[d]) else active[d][2] / rate[d]) for d in active), default=math.inf)
        t_start = min((x[0] for x in pending), default=math.inf)
        t = min(t_done, t_start)
        for d in active:
            active[d][2] = 0.0 if math.isinf(rate[d]) else active[d][2] - rate[d] * (t - now)
        now = t
        for f in [x for x in pending if x[0] <= now]:
            pending.remove(f)
            active[f[2]] = [f[1], "intra" if node[f[1]] == node[f[2]] else "inter", s, now]
        for d in [d for d, x in active.items() if x[2] <= 1e-9 * s]:
            src, c, _, started = active.pop(d)
            tally = {k: list(v) for k, v in have[src][1].items()}
            tally[c][0] += 1
            tally[c][1] += now - started
            have[d] = (now, tally)
            for k in _children(d, n):
                kc = "intra" if node[k] == node[d] else "inter"
                pending.append((now + links[kc].params(s)[0], d, k))
    _, tally = max(have.values(), key=lambda x: x[0])
    out = []
    for c, (hops, busy_us) in tally.items():
        if hops:
            b = links[c].params(s)[1]
            out.append(Term(c, hops, 0.0 if math.isinf(b) else busy_us * b * 1e3, s, bursts=hops))
    return out


def _tree(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    n, p, m = topo.ranks, topo.ranks_per_node, topo.nodes
    if n < 2:
        return None
    if op == "broadcast":
        return [t for fl in _binomial_rounds(topo) for t in _slowest(_step(topo, 1, s, fl), links)]
    if op == "barrier":
        return [t for fl in _binomial_rounds(topo) for t in _slowest(_step(topo, 2, 0.0, fl), links)]
    if op == "all_reduce":
        lat = [Term("intra", 2 * (p - 1), 0.0, s)] if p > 1 else []
        lat += [Term("inter", 2 * int(math.log2(m)), 0.0, s)] if m > 1 else []
        bw = _slowest([Term(k, 0.0, 2.0 * s, s) for k in topo.classes()], links)
        return lat + bw
    return None


def _halving_doubling(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    n = topo.ranks
    if n < 2 or op not in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        return None
    q = _pow2_below(n)
    ranks = np.arange(q)
    dists = [q >> (i + 1) for i in range(q.bit_length() - 1)]  # q/2, q/4, ..., 1 (halving order)

    def xor_step(d, msg):
        return _slowest(_step(topo, 1, msg, _flows(topo, ranks, ranks ^ d)), links)

    halving = [t for i, d in enumerate(dists) for t in xor_step(d, s / 2 ** (i + 1))]  # reduce-scatter
    doubling = [t for i, d in enumerate(reversed(dists)) for t in xor_step(d, s / q * 2**i)]  # all-gather
    terms = {"all_reduce": halving + doubling, "reduce_scatter": halving, "all_gather": doubling}.get(op)
    if op == "broadcast":  # binomial scatter (halves of the buffer, tree pattern) + all-gather
        scatter, d, i = [], q // 2, 1
        while d >= 1:
            src = np.arange(0, q, 2 * d)
            scatter += _slowest(_step(topo, 1, s / 2**i, _flows(topo, src, src + d)), links)
            d, i = d // 2, i + 1
        terms = scatter + doubling
    if q < n:  # fold the n-q extra ranks in before and answer them after: one whole-buffer step each way
        extra = np.arange(q, n)
        fold = _slowest(_step(topo, 1, s, _flows(topo, extra, extra - q)), links)
        terms = terms + fold * (1 if op == "broadcast" else 2)
    return terms


def _hierarchical(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    p, m = topo.ranks_per_node, topo.nodes
    if topo.ranks < 2:
        return None
    if p == 1 or m == 1:
        return _ring(op, topo, links, s)  # one level: the flat ring
    intra = Topology(p, p)
    inter = Topology(m, 1)
    # the intra rings see only intra links, the P concurrent inter rings share each node's link:
    # P rings of S/P bytes carry what one ring of S carries
    if op == "all_reduce":
        rs = _ring("reduce_scatter", intra, links, s)
        return rs + _ring("all_reduce", inter, links, s) + _ring("all_gather", intra, links, s)
    if op == "all_gather":
        return _ring("all_gather", inter, links, s) + _ring("all_gather", intra, links, s)
    if op == "reduce_scatter":
        return _ring("reduce_scatter", intra, links, s) + _ring("reduce_scatter", inter, links, s)
    if op == "broadcast":
        return _ring("broadcast", inter, links, s) + _ring("broadcast", intra, links, s)
    return None


def _allreduce_slice(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    return _ring("all_reduce", topo, links, s) if op == "reduce_scatter" else None


def _dissemination(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    if op != "barrier" or topo.ranks < 2:
        return None
    n, out, d = topo.ranks, [], 1
    src = np.arange(n)
    while d < n:
        out += _slowest(_step(topo, 1, 0.0, _flows(topo, src, (src + d) % n)), links)
        d *= 2
    return out


ALGORITHMS: dict[str, Callable[[str, Topology, Links, float], list[Term] | None]] = {
    "ring": _ring,
    "tree": _tree,
    "halving_doubling": _halving_doubling,
    "hierarchical": _hierarchical,
    "pairwise": _pairwise,
    "allreduce_slice": _allreduce_slice,
    "dissemination": _dissemination,
    "posted_tree": _posted_tree,
}
"""Every model (module docstring: derivation and source of each); a model returns None for an op it lacks."""


def terms(op: str, algorithm: str, topo: Topology, links: Links, size_bytes: float) -> list[Term] | None:
    """The critical path of ``op`` under ``algorithm`` at ``topo`` (None if the model has no such op)."""
    return ALGORITHMS[algorithm](op, topo, _complete(links, topo), float(size_bytes))


def _complete(links: Links, topo: Topology) -> dict:
    """Every class the topology crosses has a link: one the run never crossed is taken equal to the other."""
    out = dict(links)
    for c in CLASSES:
        if c not in out:
            other = next(iter(out.values()))
            out[c] = dataclasses.replace(
                other, link_class=c, source=f"not measured: taken equal to the {other.link_class} link ({other.source})"
            )
    return out


@dataclass(frozen=True, kw_only=True)
class Prediction:
    op: str
    algorithm: str
    size_bytes: int
    ranks: int
    ranks_per_node: int
    time_us: float
    time_ci_us: tuple[float, float] | None
    bottleneck: str
    """'bandwidth-bound, inter-node' / 'latency-bound, intra-node': the largest single component."""
    bottleneck_share: float
    """That component's share of the time."""
    bandwidth_us: float = 0.0
    """The β part of the time (every class)."""
    backend_choice: bool = False
    """The algorithm the backend runs (``backend_algorithm``)."""

    @property
    def busbw_gbps(self) -> float | None:
        if self.size_bytes <= 0 or self.time_us <= 0 or self.op not in metrics.OPS_WITH_FACTOR:
            return None
        return metrics.busbw_gbps(self.op, self.size_bytes, self.time_us * 1e-6, self.ranks)

    @property
    def bandwidth_bound(self) -> bool:
        return self.bottleneck.startswith("bandwidth")

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["busbw_gbps"] = self.busbw_gbps
        return d


def _evaluate(ts: Sequence[Term], links: Links) -> tuple[float, dict]:
    """(time µs, {(latency|bandwidth, class): µs}) of a critical path, a shaper's burst credited once."""
    comp: dict = {}
    above: dict = {}
    bursts: dict = {}
    for t in ts:
        bursts[t.link_class] = max(bursts.get(t.link_class, 1), t.bursts)
        a, b = t.parts_us(links)
        comp[("latency", t.link_class)] = comp.get(("latency", t.link_class), 0.0) + a
        comp[("bandwidth", t.link_class)] = comp.get(("bandwidth", t.link_class), 0.0) + b
        lk = links[t.link_class]
        if lk.knee_bytes is None or t.msg_bytes >= lk.knee_bytes:
            above[t.link_class] = above.get(t.link_class, 0.0) + b
    for c, b in above.items():
        lk = links[c]
        if lk.burst_bytes > 0 and math.isfinite(lk.beta_gbps):
            comp[("bandwidth", c)] -= min(bursts[c] * lk.burst_bytes / (lk.beta_gbps * 1e3), b)
    return sum(comp.values()), comp


def predict(op: str, algorithm: str, topo: Topology, links: Links, size_bytes: int) -> Prediction | None:
    """Time of ``op`` at ``size_bytes`` under ``algorithm`` over ``links``, its interval and bottleneck."""
    full = _complete(links, topo)
    ts = terms(op, algorithm, topo, full, size_bytes)
    if ts is None:
        return None
    total, comp = _evaluate(ts, full)
    (kind, cls), worst = max(comp.items(), key=lambda kv: kv[1])
    ci = None
    if any(lk.alpha_ci_us or lk.beta_ci_gbps for lk in full.values()):
        ends = []
        for e in ("lo", "hi"):
            at = {c: lk.end(e) for c, lk in full.items()}
            ends.append(_evaluate(terms(op, algorithm, topo, at, size_bytes), at)[0])
        ci = (min(ends), max(ends))
    return Prediction(
        op=op,
        algorithm=algorithm,
        size_bytes=int(size_bytes),
        ranks=topo.ranks,
        ranks_per_node=topo.ranks_per_node,
        time_us=total,
        time_ci_us=ci,
        bottleneck=f"{kind}-bound, {cls}-node",
        bottleneck_share=worst / total if total > 0 else 1.0,
        bandwidth_us=sum(v for (k, _), v in comp.items() if k == "bandwidth"),
    )


# --- which algorithm the backend runs ----------------------------------------------------------------

GLOO = {
    "all_reduce": (
        "ring",
        "gloo/allreduce.cc: AllreduceOptions UNSPECIFIED -> ring (reduce-scatter + all-gather "
        "ring in >= 2 segments per chunk); torch's ProcessGroupGloo allreduce calls gloo::allreduce",
    ),
    "all_gather": (
        "ring",
        "gloo/allgather.cc: ring, 2(n-1) half-chunk steps (allgather_into_tensor -> "
        "allgather_coalesced -> gloo::allgather)",
    ),
    "reduce_scatter": (
        "allreduce_slice",
        "torch ProcessGroupGloo reduce_scatter_tensor: all_reduce of a clone of "
        "the whole input, then the rank's chunk copied out",
    ),
    "broadcast": (
        "posted_tree",
        "gloo/broadcast.cc: binomial tree, the whole buffer per hop; each rank posts all its "
        "sends at once and waits for them at the end, so they share its link",
    ),
    "all_to_all": ("pairwise", "gloo/alltoall.cc: every peer's chunk sent directly (all posted at once)"),
    "barrier": ("dissemination", "gloo/barrier.cc: dissemination barrier (Hensgen, Finkel, Manber 1988)"),
}
"""Gloo's algorithm per op, read from its sources (gloo main, torch's ProcessGroupGloo.cpp)."""

CANDIDATES = {
    op: tuple(
        a
        for a in ALGORITHMS
        if ALGORITHMS[a](
            op,
            Topology(4, 2),
            _complete({"intra": ClassLink(link_class="intra", alpha_us=1.0, beta_gbps=1.0)}, Topology(4, 2)),
            1024.0,
        )
        is not None
    )
    for op in OPS
}
"""The models that have each op."""

NCCL_ALGO_NAMES = {"ring": "ring", "tree": "tree", "0": "tree", "1": "ring"}
"""NCCL's names (NCCL_ALGO values, debug lines; the numbers of older NCCL's TUNING lines:
NCCL_ALGO_TREE 0, NCCL_ALGO_RING 1) of the algorithms modelled here."""
NCCL_OPS = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "alltoall": "all_to_all",
}
_NCCL_LINE = re.compile(r"(?:(\w+):\s+)?(\d+) Bytes -> Algo (\w+) proto (\w+)")


def nccl_debug_choices(text: str) -> dict:
    """{(op, size_bytes): NCCL algorithm name} from NCCL debug output (TUNING/COLL lines)."""
    out = {}
    for m in _NCCL_LINE.finditer(text or ""):
        op = NCCL_OPS.get((m.group(1) or "").lower())
        if op:
            out[(op, int(m.group(2)))] = m.group(3).lower()
    return out


@dataclass(frozen=True, kw_only=True)
class Choice:
    algorithm: str | None
    """The model of what the backend runs; None when the run cannot tell."""
    how: str
    """How that was found (source cited, env var, debug line) or why it is unknown."""
    check: str = ""
    """What the run's own measurements say of it (``check_algorithms``)."""


def backend_algorithm(
    backend: str,
    op: str,
    size_bytes: int,
    recs: Sequence[dict] = (),
    debug_text: str = "",
    check: Mapping | None = None,
) -> Choice:
    """The algorithm ``backend`` runs for ``op`` at ``size_bytes``: Gloo's from its sources (checked
    against the run by ``check_algorithms`` when given), NCCL's from NCCL_ALGO / its debug lines."""
    chk = (check or {}).get(op, "")
    if backend == "gloo":
        alg, src = GLOO[op]
        return Choice(algorithm=alg, how=f"gloo source: {src}", check=chk)
    if backend == "nccl":
        if op == "barrier":
            return Choice(
                algorithm="ring", how="NCCL's barrier is an all_reduce of one element (torch ProcessGroupNCCL)"
            )
        text = debug_text + "".join(str(r.get("nccl_debug") or "") for r in recs)
        seen = nccl_debug_choices(text)
        if seen:
            sizes = sorted(s for (o, s) in seen if o == op)
            if sizes:
                near = min(sizes, key=lambda s: abs(math.log((s or 1) / max(size_bytes, 1))))
                name = seen[(op, near)]
                alg = NCCL_ALGO_NAMES.get(name)
                return Choice(
                    algorithm=alg,
                    how=f"NCCL debug line: {op} {near} B -> Algo {name}" + ("" if alg else " (not modelled here)"),
                    check=chk,
                )
        forced = {str(r.get("nccl_algo")) for r in recs if r.get("nccl_algo") not in (None, "", "default")}
        if len(forced) == 1:
            val = forced.pop()
            alg = NCCL_ALGO_NAMES.get(val.lower())
            if op != "all_reduce" and alg == "tree":
                alg = "ring"  # NCCL never disables ring for other ops (tuning.cc); tree is all_reduce's only
            return Choice(
                algorithm=alg,
                how=f"NCCL_ALGO={val} (recorded with the run)" + ("" if alg else ": not modelled here"),
                check=chk,
            )
        if op != "all_reduce":
            return Choice(
                algorithm="ring",
                how="NCCL: ring is its algorithm for this op without NVLS/CollNet/PAT "
                "(no NCCL_ALGO or debug line recorded)",
                check=chk,
            )
        return Choice(
            algorithm=None,
            how="NCCL picks ring or tree per size from its tuning model and the run did not "
            "record which (rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING)",
            check=chk,
        )
    return Choice(algorithm=None, how=f"no algorithm table for backend {backend!r}", check=chk)


# --- link parameters from a stored run --------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Point:
    """One measured (op, topology, size, time) of a stored run."""

    op: str
    topo: Topology
    size_bytes: int
    time_us: float
    backend: str
    record: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)


def run_topology(run: dict) -> Topology:
    """Ranks and ranks per node of a stored run, from its hostnames (ranks are node-contiguous)."""
    su = (run.get("machine_info") or {}).get("suite") or {}
    hosts = list(su.get("hostnames") or [])
    n = len(hosts) or int(su.get("world_size") or 1)
    if not hosts:
        return Topology(n, n)
    per = {h: hosts.count(h) for h in hosts}
    p = max(set(per.values()), key=list(per.values()).count)
    return Topology(n, p) if n % p == 0 else Topology(n, n)


def _hostnames(run: dict) -> list[str]:
    return list((((run.get("machine_info") or {}).get("suite") or {}).get("hostnames")) or [])


def _ok(r: dict) -> bool:
    return r.get("n_wrong") in (0, None) and (r.get("time_us") or 0) > 0


def collective_points(run: dict) -> list[Point]:
    """The run's measurements of the six ops in their fitted form (FIT_VARIANTS): sum for reducing
    ops, the first dtype; the collectives experiment's records (else the backends experiment's)."""
    from suite import results

    recs = [r for r in results.records(run) if _ok(r)]
    topo = run_topology(run)
    out = []
    for exp in ("collectives", "backends"):
        for r in recs:
            if r.get("experiment") != exp or r.get("op") not in FIT_VARIANTS:
                continue
            if (r.get("variant") or r["op"]) != FIT_VARIANTS[r["op"]] or r.get("redop") not in (None, "sum", "none"):
                continue
            if exp == "backends" and r.get("table") != "compare":
                continue
            if int(r.get("world_size") or topo.ranks) != topo.ranks:
                continue
            out.append(
                Point(
                    op=r["op"],
                    topo=topo,
                    size_bytes=int(r["size_bytes"]),
                    time_us=float(r["time_us"]),
                    backend=str(r.get("backend")),
                    record=r,
                )
            )
        if out:
            break
    # one point per (op, size): the median over forms measured twice (in-place and out-of-place, dtypes)
    grouped: dict = {}
    for p in out:
        grouped.setdefault((p.op, p.size_bytes), []).append(p)
    return [
        dataclasses.replace(ps[0], time_us=statistics.median(p.time_us for p in ps))
        for _, ps in sorted(grouped.items())
    ]


def p2p_links(run: dict) -> dict:
    """Per link class, α–β fitted (suite.model.fit.fit_model) to the run's point-to-point ping-pong and
    pair-matrix records (one-way times), each pair classified by its ranks' hosts."""
    from suite import results

    hosts = _hostnames(run)
    pts: dict = {}
    for r in results.records(run):
        if r.get("op") != "send_recv" or not _ok(r) or r.get("size_bytes", 0) <= 0:
            continue
        if str(r.get("pattern") or r.get("table") or "") not in ("pingpong", "pair_matrix"):
            continue
        try:
            src, dst = int(r["src"]), int(r["dst"])
        except (KeyError, TypeError, ValueError):
            continue
        if src < 0 or dst < 0 or max(src, dst) >= len(hosts):
            continue
        cls = "intra" if hosts[src] == hosts[dst] else "inter"
        pts.setdefault(cls, []).append((r["size_bytes"], r["time_us"], (src, dst)))
    out = {}
    for cls, ps in pts.items():
        m = fit.fit_model([p[0] for p in ps], [p[1] for p in ps])
        if m is None or not m.holds:
            continue
        out[cls] = _link_of(
            cls, m, f"point-to-point fit, {len({p[2] for p in ps})} {cls}-node pair(s), {len(ps)} points"
        )
    return out


def _link_of(cls: str, m: fit.Model, source: str) -> ClassLink:
    big = m.pieces[-1]
    small = None
    if m.piecewise is not None:
        small = (m.piecewise.below.alpha_us, m.piecewise.below.beta_gbps)
    return ClassLink(
        link_class=cls,
        alpha_us=big.alpha_us,
        beta_gbps=big.beta_gbps,
        alpha_ci_us=big.alpha_ci_us,
        beta_ci_gbps=big.beta_ci_gbps,
        knee_bytes=m.piecewise.knee_bytes if m.piecewise else None,
        small=small,
        source=source,
    )


def calibrate(
    points: Sequence[Point], algorithm: str, base: Links, rounds: int = 3, n_boot: int = fit.N_BOOT
) -> ClassLink | None:
    """The link (of the class the points' critical paths cross most) with which ``algorithm``
    reproduces the measured points: per point the model's α count A and bytes X of that class and the
    time F of the other class (``base``), then suite.model.fit.fit_model of (t − F)/A against X/A — per-step
    time against per-step bytes, the same relative-error fit and bootstrap as a series'; for the ring
    and one class exactly suite.model.fit.implied_link. Repeated ``rounds`` times (a step's slowest class
    depends on the links). Latency-only ops (barrier) get α alone (the median per-step time)."""
    if not points:
        return None
    topo0 = points[0].topo
    cls = "inter" if "inter" in topo0.classes() else "intra"
    links = _complete(base, topo0) if base else None
    link = None
    for i in range(rounds):
        if links is None:  # no other evidence: a unit link for this class to find the structure, the
            # other class free (its time is put on this one; at one unit link each, a step's tie went to
            # intra and left no inter-node term to fit)
            links = {
                c: ClassLink(link_class=c, alpha_us=100.0, beta_gbps=0.1, source="start")
                if c == cls
                else ClassLink(link_class=c, alpha_us=0.0, beta_gbps=math.inf, source="no evidence: free")
                for c in CLASSES
            }
        ys, xs, sizes, rows = [], [], [], []
        for p in points:
            ts = terms(p.op, algorithm, p.topo, links, p.size_bytes)
            if ts is None:
                return None
            mine = [t for t in ts if t.link_class == cls]
            a = sum(t.alphas for t in mine)
            x = sum(t.bytes for t in mine)
            f = sum(t.time_us(links) for t in ts if t.link_class != cls)
            if a <= 0 or p.time_us - f <= 0:
                continue
            ys.append((p.time_us - f) / a)
            xs.append(x / a)
            sizes.append(p.size_bytes)
            rows.append((a, x, f, p.time_us, max([t.bursts for t in mine] or [1])))
        if not ys:
            return None
        src = (
            f"{points[0].op} through the {algorithm} model, {len(ys)} point(s) at "
            f"{'/'.join(str(n) for n in sorted({p.topo.ranks for p in points}))} ranks"
        )
        if len(set(xs)) < 2 or max(xs) <= 0:
            link = ClassLink(
                link_class=cls,
                alpha_us=statistics.median(ys),
                beta_gbps=math.inf,
                alpha_ci_us=(min(ys), max(ys)),
                source=src + " (latency only)",
            )
        else:
            boot = n_boot if i == rounds - 1 else 40
            m = fit.fit_model(xs, ys, n_boot=boot)
            if m is None:
                return None
            keep = _inliers(m, xs, ys)
            if len(keep) < len(xs):
                m2 = fit.fit_model([xs[j] for j in keep], [ys[j] for j in keep], n_boot=boot)
                if m2 is not None:
                    m, rows, xs = m2, [rows[j] for j in keep], [xs[j] for j in keep]
                    src += f" ({len(ys) - len(keep)} outlier(s) left out)"
            link = _link_of(cls, m, src)
            knee = link.knee_bytes or 0.0
            burst = _fit_burst([r for r, x in zip(rows, xs) if x >= knee], link, n_boot if i == rounds - 1 else 40)
            if burst is not None:
                link = dataclasses.replace(
                    link,
                    **burst,
                    source=src + f"; with a shaper burst of {burst['burst_bytes']:.0f} B credited per fresh sender",
                )
        links = {**links, cls: link}
    return link


OUTLIER_REL = 0.25
"""A point the fitted line misses by more than this relative error *and* by more than 3x the median
miss is left out of the calibration (a latency spike of the shared CPUs at a small size would
otherwise pull β of every size: a relative-error fit weighs a 4 KiB point like a 4 MiB one)."""


def _inliers(m: fit.Model, xs, ys) -> list[int]:
    res = np.abs((np.asarray(m.time_us(np.asarray(xs, dtype=float))) - np.asarray(ys)) / np.asarray(ys))
    cut = max(OUTLIER_REL, 3 * float(np.median(res)))
    keep = [j for j, r in enumerate(res) if r <= cut]
    return keep if len(keep) >= max(4, len(xs) // 2) else list(range(len(xs)))


BURST_GAIN = 0.5
"""The burst credit is kept only where it at least halves the weighted squared error of the line."""


def _burst_solve(rows) -> tuple[float, float, float] | None:
    """(α, k µs/B, c µs) minimising Σ((t − F − Aα − Xk + c·bursts)/t)² with α, c >= 0, k > 0; None if none."""
    a, x, f, t, nb = (np.array([r[i] for r in rows], dtype=float) for i in range(5))
    y = (t - f) / t
    for cols in ((a, x, -nb), (x, -nb)):  # with α, then α = 0
        m = np.stack([c / t for c in cols], axis=1)
        sol, *_ = np.linalg.lstsq(m, y, rcond=None)
        sol = list(sol) if len(cols) == 3 else [0.0, *sol]
        if sol[0] >= 0 and sol[1] > 0 and sol[2] > 0:
            return float(sol[0]), float(sol[1]), float(sol[2])
    return None


def _fit_burst(rows, line: ClassLink, n_boot: int) -> dict | None:
    """A token-bucket link: time = Aα + X/β − bursts·burst/β (once per op, or per hop: ``Term.bursts``) fitted
    to the points above the knee,
    with bootstrap intervals; None unless it cuts the line's weighted squared error by BURST_GAIN."""
    if len(rows) < 4 or math.isinf(line.beta_gbps):
        return None
    sol = _burst_solve(rows)
    if sol is None:
        return None

    def sse(alpha, k, c):
        return sum(((t - f - a * alpha - x * k + c * nb) / t) ** 2 for a, x, f, t, nb in rows)

    k_line = 1.0 / (line.beta_gbps * 1e3)
    if sse(*sol) > BURST_GAIN * sse(line.alpha_us, k_line, 0.0):
        return None
    rng = np.random.default_rng(0)
    boots = [
        b
        for idx in rng.integers(0, len(rows), size=(n_boot, len(rows)))
        if (b := _burst_solve([rows[j] for j in idx])) is not None
    ]
    out = {"alpha_us": sol[0], "beta_gbps": 1.0 / (sol[1] * 1e3), "burst_bytes": sol[2] / sol[1]}
    if len(boots) >= n_boot // 2:
        al, kl = np.percentile([b[0] for b in boots], [2.5, 97.5]), np.percentile([b[1] for b in boots], [2.5, 97.5])
        out["alpha_ci_us"] = (float(al[0]), float(al[1]))
        out["beta_ci_gbps"] = (1.0 / (kl[1] * 1e3), 1.0 / (kl[0] * 1e3))
    return out


@dataclass(frozen=True, kw_only=True)
class RunModel:
    """What a stored run says: its topology and backend, the links per op and class, the algorithm choices."""

    topo: Topology
    backend: str
    p2p: dict
    """class -> ClassLink from point-to-point records."""
    op_links: dict
    """op -> {class -> ClassLink}: the op's calibrated link with the other class."""
    default_links: dict
    """class -> ClassLink for an op the run did not measure."""
    checks: dict
    """op -> text: the algorithm check against the run's measurements."""
    points: list
    debug_text: str = ""
    records: list = dataclasses.field(default_factory=list, repr=False)

    def links_for(self, op: str) -> dict:
        return self.op_links.get(op) or self.default_links

    def choice(self, op: str, size_bytes: int) -> Choice:
        return backend_algorithm(self.backend, op, size_bytes, self.records, self.debug_text, self.checks)


def fit_runs(runs: Sequence[dict], debug_text: str = "") -> RunModel:
    """Links and algorithm choices from one or more stored runs of one backend (their points pooled:
    runs at several world sizes constrain how time scales with n)."""
    from suite import results

    points = [p for r in runs for p in collective_points(r)]
    p2p: dict = {}
    for r in runs:
        for c, lk in p2p_links(r).items():
            p2p.setdefault(c, lk)
    recs = [x for r in runs for x in results.records(r)]
    backends = [p.backend for p in points] or [str(x.get("backend")) for x in recs]
    backend = max(set(backends), key=backends.count) if backends else "unknown"
    topo = run_topology(runs[0])
    op_links: dict = {}
    checks = check_algorithms(points, p2p) if points else {}
    for op in OPS:
        mine = [p for p in points if p.op == op]
        if not mine:
            continue
        alg = backend_algorithm(backend, op, max(p.size_bytes for p in mine), recs, debug_text).algorithm or "ring"
        lk = calibrate(mine, alg, p2p)
        if lk is not None:
            op_links[op] = _complete({**p2p, lk.link_class: lk}, topo)
    if p2p:
        default = dict(p2p)
    else:
        cal = [ls for op, ls in op_links.items() if op != "barrier"]
        default = {}
        for c in CLASSES:
            ls = [x[c] for x in cal if c in x and math.isfinite(x[c].beta_gbps)]
            if ls:
                default[c] = ClassLink(
                    link_class=c,
                    alpha_us=statistics.median(x.alpha_us for x in ls),
                    beta_gbps=statistics.median(x.beta_gbps for x in ls),
                    source=f"median of the {len(ls)} ops' calibrated {c}-node links",
                )
    # an op latency-bound at every size the run measured shows no bandwidth term (β = inf): it gets the
    # β of the other evidence, and says so
    for op, ls in op_links.items():
        for c, lk in ls.items():
            d = default.get(c)
            if op != "barrier" and math.isinf(lk.beta_gbps) and d is not None and math.isfinite(d.beta_gbps):
                ls[c] = dataclasses.replace(
                    lk,
                    beta_gbps=d.beta_gbps,
                    beta_ci_gbps=d.beta_ci_gbps,
                    knee_bytes=None,
                    small=None,
                    source=f"{lk.source}; no bandwidth term at the sizes measured: β from the {d.source}",
                )
    return RunModel(
        topo=topo,
        backend=backend,
        p2p=p2p,
        op_links=op_links,
        default_links=default,
        checks=checks,
        points=points,
        debug_text=debug_text,
        records=recs,
    )


def _rms_rel(points: Sequence[Point], algorithm: str, links: Links) -> float | None:
    errs = []
    for p in points:
        pr = predict(p.op, algorithm, p.topo, links, p.size_bytes)
        if pr is None:
            return None
        errs.append((pr.time_us - p.time_us) / p.time_us)
    return float(np.sqrt(np.mean(np.square(errs)))) if errs else None


def check_algorithms(points: Sequence[Point], base: Links) -> dict:
    """Per op: every candidate model calibrated on the op's measured points, its rms relative error,
    and the verdict on the backend's documented choice. One world size tells the models apart only by
    the shape in S (every α–β line looks alike), so the verdict says how many world sizes it saw."""
    out = {}
    for op in OPS:
        mine = [p for p in points if p.op == op and p.size_bytes > 0] or [p for p in points if p.op == op]
        if not mine:
            continue
        worlds = sorted({p.topo.ranks for p in mine})
        ref = GLOO[op][0] if mine[0].backend == "gloo" else "ring"
        lk0 = calibrate(mine, ref, base, n_boot=40) if ref in CANDIDATES[op] else None
        if lk0 is not None and op != "barrier":  # compare the models where bytes, not start-ups, decide
            at = _complete({**base, lk0.link_class: lk0}, mine[0].topo)
            bw = [
                p
                for p in mine
                if (q := predict(op, ref, p.topo, at, p.size_bytes)) is not None
                and q.bandwidth_us >= BANDWIDTH_BOUND * p.time_us
            ]
            mine = bw if len(bw) >= 3 else mine
        errs = {}
        for alg in CANDIDATES[op]:
            lk = calibrate(mine, alg, base, n_boot=40)
            if lk is None:
                continue
            e = _rms_rel(mine, alg, _complete({**base, lk.link_class: lk}, mine[0].topo))
            if e is not None:
                errs[alg] = e
        if not errs:
            continue
        best = min(errs, key=errs.get)
        doc = GLOO[op][0] if mine[0].backend == "gloo" else None
        listing = ", ".join(f"{a} {100 * e:.1f}%" for a, e in sorted(errs.items(), key=lambda kv: kv[1]))
        where = f"{len(worlds)} world size(s) {'/'.join(map(str, worlds))}"
        if max(errs.values()) - min(errs.values()) < 0.005:
            verdict = (
                f"not testable here: every model fits alike "
                f"({'one world size: each is an α–β line in S' if len(worlds) < 2 else 'same shape at these sizes'})"
            )
        elif doc is None or doc not in errs:
            verdict = f"best fit: {best}"
        elif errs[doc] <= errs[best] * 1.25 + 0.01:
            verdict = f"{doc} consistent with the measurements"
        else:
            verdict = f"measurements favour {best} over the documented {doc}"
        out[op] = f"{verdict} ({where}; rms error per model: {listing})"
    return out


# --- DDP ------------------------------------------------------------------------------------------------


def ddp_baselines(run: dict) -> list[dict]:
    """Per model of the ddp experiment: the default-DDP record and the numbers the step model needs."""
    from suite import results

    out = []
    for r in results.records(run):
        if r.get("experiment") != "ddp" or r.get("op") != "ddp_step" or r.get("label") != "ddp" or not _ok(r):
            continue
        need = ("noop_step_ms", "allreduce_ms", "solo_step_ms", "bucket_sizes", "overlap_saved_ms")
        if all(r.get(k) is not None for k in need):
            out.append(r)
    return out


def record_topology(rec: dict) -> Topology:
    """The topology a record was measured at (``world_size`` ranks on ``hosts`` hosts)."""
    n, h = int(rec["world_size"]), int(rec.get("hosts") or 1)
    return Topology(n, n // h) if h > 0 and n % h == 0 else Topology(n, n)


def predict_ddp(rec: dict, topo: Topology, links: Links, algorithm: str) -> dict:
    """The DDP step at ``topo`` (module docstring): compute + bucket all_reduces − the hidden share."""
    measured_topo = record_topology(rec)
    buckets = [int(b) for b in rec["bucket_sizes"]]

    def comm_us(t):
        return sum(predict("all_reduce", algorithm, t, links, b).time_us for b in buckets)

    comm0 = comm_us(measured_topo)
    frac = min(max(rec["overlap_saved_ms"] / rec["allreduce_ms"], 0.0), 1.0) if rec["allreduce_ms"] > 0 else 0.0
    window_us = (rec.get("ddp_logger_backward_compute_ms") or math.inf) * 1e3
    noop_us, solo_us = rec["noop_step_ms"] * 1e3, rec["solo_step_ms"] * 1e3

    def step_us(comm):
        return noop_us + comm - min(frac * comm, window_us)

    comm = comm_us(topo)
    step = step_us(comm)
    return {
        "model": rec.get("model"),
        "ranks": topo.ranks,
        "ranks_per_node": topo.ranks_per_node,
        "n_buckets": len(buckets),
        "bucket_sizes": buckets,
        "compute_us": noop_us,
        "solo_step_us": solo_us,
        "comm_us": comm,
        "hidden_fraction": frac,
        "hidden_us": min(frac * comm, window_us),
        "step_us": step,
        "scaling_efficiency": solo_us / step if step > 0 else None,
        "algorithm": algorithm,
        "measured_ranks": measured_topo.ranks,
        "measured_step_us": rec["time_us"],
        "model_step_at_measured_us": step_us(comm0),
        "model_comm_at_measured_us": comm0,
        "measured_allreduce_us": rec["allreduce_ms"] * 1e3,
    }


# --- tables -------------------------------------------------------------------------------------------


def extrapolate(model: RunModel, topo: Topology, sizes: Sequence[int]) -> list[Prediction]:
    """Every op, size and model at ``topo``; the backend's algorithm marked."""
    out = []
    for op in OPS:
        for s in [0] if op == "barrier" else sizes:
            choice = model.choice(op, s).algorithm
            for alg in CANDIDATES[op]:
                pr = predict(op, alg, topo, model.links_for(op), s)
                if pr is not None:
                    out.append(dataclasses.replace(pr, backend_choice=alg == choice))
    return out


def measured_scale(model: RunModel) -> list[dict]:
    """Predicted (the backend's algorithm over the op's calibrated link: in-sample; and over the
    point-to-point link where the run has one: out-of-sample) vs measured, at the run's own points."""
    rows = []
    for p in model.points:
        alg = model.choice(p.op, p.size_bytes).algorithm or "ring"
        pr = predict(p.op, alg, p.topo, model.links_for(p.op), p.size_bytes)
        row = {
            "op": p.op,
            "size_bytes": p.size_bytes,
            "ranks": p.topo.ranks,
            "algorithm": alg,
            "measured_us": p.time_us,
            "predicted_us": pr.time_us if pr else None,
            "error": (pr.time_us - p.time_us) / p.time_us if pr else None,
            "bottleneck": pr.bottleneck if pr else "",
        }
        if model.p2p:
            q = predict(p.op, alg, p.topo, model.p2p, p.size_bytes)
            row["predicted_p2p_us"] = q.time_us if q else None
            row["error_p2p"] = (q.time_us - p.time_us) / p.time_us if q else None
        rows.append(row)
    return rows


def _num(x):
    return None if x is None else ("inf" if isinstance(x, float) and math.isinf(x) else x)


def _fmt_t(us: float) -> str:
    return f"{us / 1e6:.3g} s" if us >= 1e6 else f"{us / 1e3:.3g} ms" if us >= 1e3 else f"{us:.3g} µs"


def format_links(links: Links, title: str) -> list[str]:
    out = []
    for c in CLASSES:
        lk = links.get(c)
        if lk is None:
            continue
        ci = "" if not lk.beta_ci_gbps else f" [{lk.beta_ci_gbps[0]:.4g}, {lk.beta_ci_gbps[1]:.4g}]"
        aci = "" if not lk.alpha_ci_us else f" [{lk.alpha_ci_us[0]:.3g}, {lk.alpha_ci_us[1]:.3g}]"
        knee = (
            f"; below {metrics.format_size(int(lk.knee_bytes))} messages α {lk.small[0]:.3g} µs, β {lk.small[1]:.4g} "
            f"GB/s"
            if lk.small
            else ""
        )
        out.append(
            f"#   {title} {c}-node: α {lk.alpha_us:.3g} µs{aci}, β {lk.beta_gbps:.4g} GB/s{ci}{knee} ({lk.source})"
        )
    return out


def format_predictions(preds: Sequence[Prediction]) -> str:
    head = f"{'op':<15}{'size':>8}  {'algorithm':<18}{'time':>11}  {'95% interval':<22}{'busbw GB/s':>11}  bottleneck"
    lines = [head, "-" * len(head)]
    for p in preds:
        ci = f"[{_fmt_t(p.time_ci_us[0])}, {_fmt_t(p.time_ci_us[1])}]" if p.time_ci_us else "-"
        bw = f"{p.busbw_gbps:.4g}" if p.busbw_gbps is not None else "-"
        mark = " *" if p.backend_choice else ""
        lines.append(
            f"{p.op:<15}{metrics.format_size(p.size_bytes) if p.size_bytes else '-':>8}  "
            f"{p.algorithm + mark:<18}{_fmt_t(p.time_us):>11}  {ci:<22}{bw:>11}  "
            f"{p.bottleneck} ({100 * p.bottleneck_share:.0f}%)"
        )
    return "\n".join(lines) + "\n"


PROVENANCE = {
    "links": "derived: α–β per link class fitted (suite.model.fit.fit_model, bootstrap 95% intervals) to "
    "point-to-point records, and per op calibrated through the backend's algorithm model to the op's measured series",
    "predictions.time_us": "modelled: the named algorithm's α–β model (suite.model) over the links",
    "predictions.time_ci_us": "modelled: the same model at the slow and fast ends of the links' intervals",
    "predictions.busbw_gbps": "derived: size_bytes / time_us x nccl-tests busbw factor at ranks (suite.metrics)",
    "predictions.bottleneck": "modelled: the largest α or β component of the model's time, with its link class",
    "predictions.backend_choice": "found: Gloo from its sources checked against the run; "
    "NCCL from NCCL_ALGO / debug lines",
    "measured_scale.measured_us": "measured: the record's time_us",
    "measured_scale.predicted_us": "modelled: backend's algorithm over the op's calibrated link (in-sample)",
    "measured_scale.predicted_p2p_us": "modelled: backend's algorithm over the point-to-point link (out-of-sample)",
    "ddp.step_us": "modelled: measured no-op-hook step + modelled bucket all_reduces − the measured hidden share",
    "ddp.scaling_efficiency": "derived: measured solo step / modelled step",
}


def prediction_document(model: RunModel, topo: Topology, sizes: Sequence[int], run_name: str) -> dict:
    preds = extrapolate(model, topo, sizes)
    ddp = []
    for rec in ddp_baselines_from(model):
        alg = model.choice("all_reduce", max(rec["bucket_sizes"])).algorithm or "ring"
        ddp.append(predict_ddp(rec, topo, model.links_for("all_reduce"), alg))
    return {
        "run": run_name,
        "ranks": topo.ranks,
        "ranks_per_node": topo.ranks_per_node,
        "nodes": topo.nodes,
        "measured_ranks": model.topo.ranks,
        "measured_ranks_per_node": model.topo.ranks_per_node,
        "backend": model.backend,
        "links": {
            "p2p": {c: lk.as_dict() for c, lk in model.p2p.items()},
            "per_op": {op: {c: lk.as_dict() for c, lk in ls.items()} for op, ls in model.op_links.items()},
            "default": {c: lk.as_dict() for c, lk in _complete(model.default_links, topo).items()}
            if model.default_links
            else {},
        },
        "algorithms": {op: dataclasses.asdict(model.choice(op, max(sizes) if sizes else 0)) for op in OPS},
        "predictions": [p.as_dict() for p in preds],
        "measured_scale": measured_scale(model),
        "ddp": ddp,
        "provenance": PROVENANCE,
    }


def ddp_baselines_from(model: RunModel) -> list[dict]:
    return ddp_baselines({"benchmarks": [{"extra_info": r} for r in model.records]})


# --- the report's section --------------------------------------------------------------------------

REPORT_NOTE = (
    "Predicted vs measured at the run's own scale: the backend's algorithm (suite.model: Gloo's from its "
    "sources, checked against the run; NCCL's from NCCL_ALGO / its debug lines) over the op's link calibrated "
    "on these very points (in-sample: how well the model's shape fits), and, where the run has "
    "point-to-point records, over the link they measured (out-of-sample). error = predicted / measured − 1. "
    "The extrapolation table is the run's predict.json (make predict RUN=... RANKS=... RANKS_PER_NODE=...); "
    "* marks the algorithm the backend runs."
)


def report_parts(
    run: dict, doc: dict | None = None
) -> tuple[list[str], list[tuple[list[str], list[list[str]]]], str] | None:
    """(notes, grids, text) of the report's prediction section from a stored run and its predict.json; None if
    the run has nothing to fit."""
    model = fit_runs([run])
    if not model.points and not model.p2p:
        return None
    notes = [REPORT_NOTE] + [
        f"{op}: {model.choice(op, 0).algorithm} — {model.choice(op, 0).how}"
        + (f"; check: {model.checks[op]}" if op in model.checks else "")
        for op in OPS
    ]
    head = [
        "measured vs predicted at the run's scale",
        "op",
        "ranks",
        "size",
        "algorithm",
        "measured",
        "predicted",
        "error",
        "over p2p link",
        "error (p2p)",
        "bottleneck",
    ]
    rows, text = [], ["  ".join(f"{c:>10}" for c in head[1:])]
    for r in measured_scale(model):
        q = r.get("predicted_p2p_us")
        cells = [
            r["op"],
            str(r["ranks"]),
            metrics.format_size(r["size_bytes"]) if r["size_bytes"] else "-",
            r["algorithm"],
            _fmt_t(r["measured_us"]),
            _fmt_t(r["predicted_us"]) if r["predicted_us"] else "-",
            f"{100 * r['error']:+.1f}%" if r["error"] is not None else "-",
            _fmt_t(q) if q else "-",
            f"{100 * r['error_p2p']:+.1f}%" if r.get("error_p2p") is not None else "-",
            r["bottleneck"],
        ]
        rows.append([""] + cells)
        text.append("  ".join(f"{c:>10}" for c in cells))
    grids = [(head, rows)]
    if doc:
        ehead = [
            f"extrapolation to {doc['ranks']} ranks ({doc['ranks_per_node']} per node)",
            "op",
            "size",
            "algorithm",
            "time",
            "95% interval",
            "busbw (GB/s)",
            "bottleneck",
        ]
        erows = []
        for p in doc.get("predictions") or []:
            ci = p.get("time_ci_us")
            erows.append(
                [
                    "",
                    p["op"],
                    metrics.format_size(p["size_bytes"]) if p["size_bytes"] else "-",
                    p["algorithm"] + (" *" if p.get("backend_choice") else ""),
                    _fmt_t(p["time_us"]),
                    f"[{_fmt_t(ci[0])}, {_fmt_t(ci[1])}]" if ci else "-",
                    f"{p['busbw_gbps']:.4g}" if p.get("busbw_gbps") is not None else "-",
                    p["bottleneck"],
                ]
            )
        grids.append((ehead, erows))
        text += [
            "",
            ehead[0],
            format_predictions(
                [Prediction(**{k: v for k, v in p.items() if k != "busbw_gbps"}) for p in doc.get("predictions") or []]
            ),
        ]
        for d in doc.get("ddp") or []:
            notes.append(
                f"DDP step ({d['model']}) at {doc['ranks']} ranks: {_fmt_t(d['step_us'])}, scaling efficiency "
                f"{d['scaling_efficiency']:.3f} (model at the measured {d['measured_ranks']} ranks "
                f"{_fmt_t(d['model_step_at_measured_us'])}, measured {_fmt_t(d['measured_step_us'])})"
            )
    else:
        notes.append(
            "No predict.json in the run directory: `make predict RUN=<run> RANKS=<n> RANKS_PER_NODE=<p>` adds "
            "the extrapolation table."
        )
    return notes, grids, "\n".join(text)


# --- validation: fit on some runs, predict the others ------------------------------------------------


def geomean_abs(errors: Sequence[float]) -> float | None:
    """Geometric mean of |error| (each floored at 1e-4, so an exact hit does not zero it)."""
    es = [max(abs(e), 1e-4) for e in errors if e is not None and math.isfinite(e)]
    return float(math.exp(sum(math.log(e) for e in es) / len(es))) if es else None


def validate(fit_on: Sequence[dict], check: Sequence[dict], debug_text: str = "") -> dict:
    """Fit the links on ``fit_on``, predict every (op, size) of each ``check`` run at its topology with the
    backend's algorithm, and compare with what it measured; per op the geomean |error| of all sizes and of
    the bandwidth-bound ones (ASTRA-sim's validation table)."""
    model = fit_runs(fit_on, debug_text)
    rows = []
    for run in check:
        for p in collective_points(run):
            alg = model.choice(p.op, p.size_bytes).algorithm or "ring"
            pr = predict(p.op, alg, p.topo, model.links_for(p.op), p.size_bytes)
            if pr is None:
                continue
            rows.append(
                {
                    "op": p.op,
                    "size_bytes": p.size_bytes,
                    "ranks": p.topo.ranks,
                    "ranks_per_node": p.topo.ranks_per_node,
                    "algorithm": alg,
                    "predicted_us": pr.time_us,
                    "predicted_ci_us": pr.time_ci_us,
                    "measured_us": p.time_us,
                    "error": (pr.time_us - p.time_us) / p.time_us,
                    "bottleneck": pr.bottleneck,
                    "bandwidth_bound": pr.bandwidth_us >= BANDWIDTH_BOUND * p.time_us,
                }
            )
    summary = {}
    for op in OPS:
        mine = [r for r in rows if r["op"] == op]
        if not mine:
            continue
        bw = [r["error"] for r in mine if r["bandwidth_bound"]]
        summary[op] = {
            "geomean_abs_error": geomean_abs([r["error"] for r in mine]),
            "geomean_abs_error_bandwidth_bound": geomean_abs(bw),
            "n": len(mine),
            "n_bandwidth_bound": len(bw),
        }
    ddp_rows = []
    fit_ddp = ddp_baselines_from(model)
    for run in check:
        t = run_topology(run)
        for rec in ddp_baselines(run):
            # the fit run nearest the check scale: its compute, buckets and overlap
            same = [b for b in fit_ddp if b.get("model") == rec.get("model")]
            if not same:
                continue
            base = min(same, key=lambda b: (abs(int(b["world_size"]) - t.ranks), -int(b["world_size"])))
            pr = predict_ddp(
                base,
                t,
                model.links_for("all_reduce"),
                model.choice("all_reduce", max(base["bucket_sizes"])).algorithm or "ring",
            )
            ddp_rows.append(
                {
                    "model": rec.get("model"),
                    "ranks": t.ranks,
                    "fit_ranks": int(base["world_size"]),
                    "predicted_us": pr["step_us"],
                    "predicted_comm_us": pr["comm_us"],
                    "predicted_hidden_us": pr["hidden_us"],
                    "compute_us": pr["compute_us"],
                    "measured_us": rec["time_us"],
                    "error": (pr["step_us"] - rec["time_us"]) / rec["time_us"],
                }
            )
    everywhere = check_algorithms([p for r in [*fit_on, *check] for p in collective_points(r)], model.p2p)
    return {
        "fit_ranks": sorted({p.topo.ranks for p in model.points}),
        "check_all_runs": everywhere,
        "links": {op: {c: lk.as_dict() for c, lk in ls.items()} for op, ls in model.op_links.items()},
        "algorithms": {op: dataclasses.asdict(model.choice(op, 0)) for op in OPS},
        "rows": rows,
        "summary": summary,
        "ddp": ddp_rows,
        "ddp_summary": {"geomean_abs_error": geomean_abs([r["error"] for r in ddp_rows]), "n": len(ddp_rows)}
        if ddp_rows
        else None,
        "target_bandwidth_bound": TARGET,
    }


BANDWIDTH_BOUND = 0.5
"""A measured point is bandwidth-bound when moving its bytes at the links' β (the model's β part) accounts
for at least this share of the time it took; below, start-up, CPU and scheduling dominate it."""
TARGET = 0.10
"""Geomean |error| the bandwidth-bound sizes of all_reduce, all_gather, reduce_scatter and broadcast aim at."""
TARGET_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def format_validation(v: dict) -> str:
    out = [
        f"# fitted on {'/'.join(map(str, v['fit_ranks']))} ranks; predicted with the backend's algorithm "
        f"(error = predicted / measured − 1; bandwidth-bound: the model's β part is >= "
        f"{100 * BANDWIDTH_BOUND:.0f}% of the measured time)"
    ]
    for op, a in v["algorithms"].items():
        out.append(f"#   {op}: {a['algorithm']} — on the fit runs: {a['check'] or a['how']}")
        if op in v.get("check_all_runs", {}):
            out.append(f"#   {' ' * len(op)}  on every run: {v['check_all_runs'][op]}")
    head = f"{'op':<15}{'ranks':>6}{'size':>8}  {'algorithm':<16}{'predicted':>11}{'measured':>11}{'error':>9}  bound"
    out += [head, "-" * len(head)]
    for r in sorted(v["rows"], key=lambda r: (OPS.index(r["op"]), r["ranks"], r["size_bytes"])):
        bound = "bandwidth-bound" if r["bandwidth_bound"] else "latency-bound"
        miss = "" if r["bandwidth_bound"] or abs(r["error"]) <= TARGET else "  (model misses)"
        out.append(
            f"{r['op']:<15}{r['ranks']:>6}{metrics.format_size(r['size_bytes']) if r['size_bytes'] else '-':>8}"
            f"  {r['algorithm']:<16}{_fmt_t(r['predicted_us']):>11}{_fmt_t(r['measured_us']):>11}"
            f"{100 * r['error']:>+8.1f}%  {bound}{miss}"
        )
    out += [
        "",
        f"{'op':<15}{'geomean |err| all':>18}{'bandwidth-bound':>17}  target ≤ {100 * TARGET:.0f}% (bandwidth-bound)",
    ]
    for op, s in v["summary"].items():
        g, gb = s["geomean_abs_error"], s["geomean_abs_error_bandwidth_bound"]
        verdict = (
            ""
            if op not in TARGET_OPS
            else ("  no bandwidth-bound size" if gb is None else "  met" if gb <= TARGET else "  MISSED")
        )
        out.append(
            f"{op:<15}{100 * g:>17.1f}%{(f'{100 * gb:.1f}%' if gb is not None else '-'):>17}"
            f"  ({s['n_bandwidth_bound']}/{s['n']} sizes){verdict}"
        )
    for r in v.get("ddp") or []:
        out.append(
            f"ddp step ({r['model']}) at {r['ranks']} ranks: predicted {_fmt_t(r['predicted_us'])} (compute "
            f"{_fmt_t(r['compute_us'])} + all_reduce {_fmt_t(r['predicted_comm_us'])} − hidden "
            f"{_fmt_t(r['predicted_hidden_us'])}, from the {r['fit_ranks']}-rank run), measured "
            f"{_fmt_t(r['measured_us'])}, error {100 * r['error']:+.1f}%"
        )
    if v.get("ddp_summary"):
        d = v["ddp_summary"]
        out.append(f"ddp step: geomean |err| {100 * d['geomean_abs_error']:.1f}% over {d['n']} scales")
    return "\n".join(out) + "\n"


# --- command line -----------------------------------------------------------------------------------


class InputError(ValueError):
    """Bad input: one line, exit status 2."""


def _load(path: str) -> dict:
    from suite import results

    p = Path(path)
    if not (p / "bench.json").is_file() and not p.is_file():
        raise InputError(f"no stored run at {path} (expected {p / 'bench.json'})")
    try:
        return results.load_run(p)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read run {path}: {e}") from None


def _positive_int(name: str, text: str) -> int:
    if not re.fullmatch(r"\s*\d+\s*", str(text)) or int(text) < 1:
        raise InputError(f"{name} must be a positive integer, got {text!r}")
    return int(text)


def _debug_text(run_dir: Path) -> str:
    return (
        "".join(f.read_text(errors="replace") for f in sorted(run_dir.glob("*.log")) if f.is_file())
        if run_dir.is_dir()
        else ""
    )


def run_sizes(model: RunModel) -> list[int]:
    return sorted({p.size_bytes for p in model.points if p.size_bytes > 0}) or [1 << 10, 1 << 20, 1 << 26]


def _cmd_predict(args) -> int:
    ranks = _positive_int("RANKS", args.ranks)
    per = _positive_int("RANKS_PER_NODE", args.ranks_per_node)
    if ranks < 2 or ranks > MAX_RANKS:
        raise InputError(f"RANKS must be in 2..{MAX_RANKS}, got {ranks}")
    if per > ranks or ranks % per:
        raise InputError(f"RANKS_PER_NODE={per} must divide RANKS={ranks} (whole nodes)")
    sizes = None
    if args.sizes:
        try:
            sizes = sorted({metrics.parse_size(x) for x in args.sizes.split(",") if x.strip()})
        except ValueError as e:
            raise InputError(f"SIZES: {e}") from None
        if not sizes or min(sizes) <= 0:
            raise InputError(f"SIZES must be positive byte sizes, got {args.sizes!r}")
    run = _load(args.run)
    rd = Path(args.run) if Path(args.run).is_dir() else Path(args.run).parent
    model = fit_runs([run], _debug_text(rd))
    if not model.points and not model.p2p:
        raise InputError(f"run {args.run} has no collective or point-to-point records to fit links from")
    topo = Topology(ranks, per)
    sizes = sizes or run_sizes(model)
    doc = prediction_document(model, topo, sizes, str((run.get("suite") or {}).get("run_id") or rd.resolve().name))
    out = [
        f"# prediction at {ranks} ranks ({per} per node, {topo.nodes} nodes) from run {args.run} "
        f"({model.topo.ranks} ranks, {model.topo.ranks_per_node} per node, {model.backend})"
    ]
    shown = set()
    for op in OPS:
        ls = model.links_for(op)
        key = tuple(sorted((c, lk.source) for c, lk in ls.items()))
        if key not in shown:
            shown.add(key)
            out += format_links(_complete(ls, topo), f"{op} link")
    for op in OPS:
        c = model.choice(op, max(sizes))
        out.append(
            f"#   {op}: backend runs {c.algorithm or 'unknown'} ({c.how})" + (f"; check: {c.check}" if c.check else "")
        )
    out.append("#   * = the algorithm the backend runs; time interval from the links' 95% intervals")
    sys.stdout.write(
        "\n".join(out)
        + "\n"
        + format_predictions(
            [Prediction(**{k: v for k, v in p.items() if k != "busbw_gbps"}) for p in doc["predictions"]]
        )
    )
    for d in doc["ddp"]:
        print(
            f"ddp step ({d['model']}, {d['n_buckets']} buckets): compute {_fmt_t(d['compute_us'])} + comm "
            f"{_fmt_t(d['comm_us'])} − hidden {_fmt_t(d['hidden_us'])} = {_fmt_t(d['step_us'])} at {ranks} ranks; "
            f"scaling efficiency {d['scaling_efficiency']:.3f} (model at the measured {d['measured_ranks']} ranks: "
            f"{_fmt_t(d['model_step_at_measured_us'])}, measured {_fmt_t(d['measured_step_us'])})"
        )
    from suite.fileio import write_json_atomic

    dest = rd / "predict.json"
    write_json_atomic(dest, doc)
    print(f"predict.json: {dest}")
    return 0


def _cmd_validate(args) -> int:
    fit_on = [_load(p) for p in args.fit.split(",") if p]
    check = [_load(p) for p in args.check.split(",") if p]
    if not fit_on or not check:
        raise InputError("validate needs --fit RUN[,RUN...] and --check RUN[,RUN...]")
    v = validate(fit_on, check)
    if not v["rows"]:
        raise InputError("the check runs have no collective records the fitted model can predict")
    sys.stdout.write(format_validation(v))
    if args.out:
        from suite.fileio import write_json_atomic

        write_json_atomic(args.out, v)
        print(f"validation: {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m suite.model", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    p = sub.add_parser("predict", help="the extrapolation table of a stored run; writes RUN/predict.json")
    p.add_argument("run")
    p.add_argument("--ranks", required=True)
    p.add_argument("--ranks-per-node", required=True)
    p.add_argument("--sizes", default="", help="comma-separated sizes (default: the run's)")
    p.set_defaults(fn=_cmd_predict)
    p = sub.add_parser("validate", help="fit on some runs, predict and compare with others")
    p.add_argument("--fit", required=True)
    p.add_argument("--check", required=True)
    p.add_argument("--out", default="")
    p.set_defaults(fn=_cmd_validate)
    if argv and argv[0] not in ("predict", "validate", "-h", "--help"):
        argv = ["predict", *argv]
    try:
        args = ap.parse_args(argv)
        if not getattr(args, "fn", None):
            ap.print_help()
            return 2
        return args.fn(args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
