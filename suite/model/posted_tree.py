"""Gloo's binomial-tree broadcast as Gloo runs it (gloo/broadcast.cc): posted sends share a rank's link;
a closed recursion with one rank per node, a fluid simulation of the node links with several."""

from __future__ import annotations

import math

from suite.model.links import Links, Term, Topology

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


def posted_tree(op: str, topo: Topology, links: Links, s: float) -> list[Term] | None:
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
