"""The algorithm models: op -> the ``Term`` s of its critical path under each algorithm (suite.model's
docstring: the derivation and source of each)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from suite import op_table
from suite.model import fit
from suite.model.links import ClassLink, Links, Term, Topology, complete_links, node_flows, slowest, step_terms
from suite.model.posted_tree import posted_tree

OPS = tuple(f.name for f in op_table.MODELLED)
"""The ops the models cover, in the order of their tables: the op table's families with a model
(suite/op_table.py), whose busbw factor and ring latency steps are the ring model's coefficients
(fit.ring_coefficients)."""
RING_OPS = tuple(f.name for f in op_table.MODELLED if f.model.ring)
"""The ops with a ring and a recursive halving/doubling model (all_to_all has pairwise, barrier no bytes)."""


def _pow2_below(n: int) -> int:
    return 1 << (n.bit_length() - 1)


# --- the algorithms: op -> Terms ----------------------------------------------------------------


def _ring(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    c = fit.ring_coefficients(op, topo.ranks)
    if c is None or op not in RING_OPS:
        return None
    a, b = c
    msg = b * s / a  # one step's message: S/n (the chain broadcast: S in n-1 pipelined segments)
    return slowest([Term(k, a, b * s, msg) for k in topo.classes()], links)


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
        out += slowest(step_terms(topo, count, msg, (has_intra, f)), links)
    return out


def _binomial_rounds(topo: Topology) -> list[tuple[bool, int]]:
    """Flows of each round of a binomial tree from rank 0 (round with distance d: ranks < d send to rank + d)."""
    n, out, d = topo.ranks, [], 1
    while d < n:
        src = np.arange(min(d, n - d))
        out.append(node_flows(topo, src, src + d))
        d *= 2
    return out


def _tree(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    n, p, m = topo.ranks, topo.ranks_per_node, topo.nodes
    if n < 2:
        return None
    if op == "broadcast":
        return [t for fl in _binomial_rounds(topo) for t in slowest(step_terms(topo, 1, s, fl), links)]
    if op == "barrier":
        return [t for fl in _binomial_rounds(topo) for t in slowest(step_terms(topo, 2, 0.0, fl), links)]
    if op == "all_reduce":
        lat = [Term("intra", 2 * (p - 1), 0.0, s)] if p > 1 else []
        lat += [Term("inter", 2 * int(math.log2(m)), 0.0, s)] if m > 1 else []
        bw = slowest([Term(k, 0.0, 2.0 * s, s) for k in topo.classes()], links)
        return lat + bw
    return None


def _halving_doubling(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
    n = topo.ranks
    if n < 2 or op not in RING_OPS:
        return None
    q = _pow2_below(n)
    ranks = np.arange(q)
    dists = [q >> (i + 1) for i in range(q.bit_length() - 1)]  # q/2, q/4, ..., 1 (halving order)

    def xor_step(d, msg):
        return slowest(step_terms(topo, 1, msg, node_flows(topo, ranks, ranks ^ d)), links)

    phases = op_table.FAMILY[op].model.halving_doubling
    steps = {
        "halving": lambda: [t for i, d in enumerate(dists) for t in xor_step(d, s / 2 ** (i + 1))],  # reduce-scatter
        "doubling": lambda: [t for i, d in enumerate(reversed(dists)) for t in xor_step(d, s / q * 2**i)],  # gather
        "binomial_scatter": lambda: _binomial_scatter(topo, links, s, q),
    }
    terms = [t for phase in phases for t in steps[phase]()]
    if q < n:  # fold the n-q extra ranks in before and answer them after: one step each way
        flows = node_flows(topo, np.arange(q, n), np.arange(q, n) - q)
        for msg in FOLD_BYTES[op](s, n):
            terms = terms + slowest(step_terms(topo, 1, msg, flows), links)
    return terms


def _binomial_scatter(topo: Topology, links: Links, s: float, q: int) -> list[Term]:
    """A broadcast's first phase over q ranks: halves of the buffer down a binomial tree."""
    scatter, d, i = [], q // 2, 1
    while d >= 1:
        src = np.arange(0, q, 2 * d)
        scatter += slowest(step_terms(topo, 1, s / 2**i, node_flows(topo, src, src + d)), links)
        d, i = d // 2, i + 1
    return scatter


FOLD_BYTES = {f.name: f.model.fold for f in op_table.MODELLED if f.model.fold is not None}
"""What an extra rank of a folded halving/doubling sends in before and receives after (Thakur et al. 2005 §4;
the op table's ``Model.fold``, suite/op_table.py): its whole buffer in and its result out; reduce_scatter's
result is its own chunk, all_gather sends in only its own chunk, a broadcast's extra rank is only answered."""


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
        out += slowest(step_terms(topo, 1, 0.0, node_flows(topo, src, (src + d) % n)), links)
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
    "posted_tree": posted_tree,
}
"""Every model (suite.model's docstring: derivation and source of each); a model returns None for an op it lacks."""


def terms(op: str, algorithm: str, topo: Topology, links: Links, size_bytes: float) -> list[Term] | None:
    """The critical path of ``op`` under ``algorithm`` at ``topo`` (None if the model has no such op)."""
    return ALGORITHMS[algorithm](op, topo, complete_links(links, topo), float(size_bytes))


CANDIDATES = {
    op: tuple(
        a
        for a in ALGORITHMS
        if ALGORITHMS[a](
            op,
            Topology(4, 2),
            complete_links({"intra": ClassLink(link_class="intra", alpha_us=1.0, beta_gbps=1.0)}, Topology(4, 2)),
            1024.0,
        )
        is not None
    )
    for op in OPS
}
"""The models that have each op."""
