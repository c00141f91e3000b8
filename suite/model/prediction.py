"""One prediction: the time of an op under an algorithm over links, its interval from the links'
intervals and its bottleneck (the largest α or β component)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from suite import metrics
from suite.model.algorithms import terms
from suite.model.links import Links, Term, Topology, complete_links

BANDWIDTH_BOUND = 0.5
"""A measured point is bandwidth-bound when moving its bytes at the links' β (the model's β part) accounts
for at least this share of the time it took; below, start-up, CPU and scheduling dominate it."""


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
    full = complete_links(links, topo)
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
