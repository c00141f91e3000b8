"""Link classes (intra-/inter-node), the topology of ranks on nodes, and the ``Term`` algebra of a
critical path (suite.model's docstring: the link classes and what a Term is)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

CLASSES = ("intra", "inter")


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
            "beta_gbps": json_num(self.beta_gbps),
            "alpha_ci_us": self.alpha_ci_us and [json_num(x) for x in self.alpha_ci_us],
            "beta_ci_gbps": self.beta_ci_gbps and [json_num(x) for x in self.beta_ci_gbps],
            "knee_bytes": self.knee_bytes,
            "small": self.small and [json_num(x) for x in self.small],
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


def slowest(cands: Sequence[Term], links: Links) -> list[Term]:
    """One synchronous step (or steps) on every class at once: it lasts as long as its slowest class."""
    cands = [t for t in cands if t is not None]
    return [max(cands, key=lambda t: t.time_us(links))] if cands else []


def node_flows(topo: Topology, src: np.ndarray, dst: np.ndarray) -> tuple[bool, int]:
    """(some pair is on one node, the most flows one node's link carries in either direction)."""
    p = topo.ranks_per_node
    sn, dn = src // p, dst // p
    cross = sn != dn
    inter = 0
    if cross.any():
        inter = int(max(np.bincount(sn[cross]).max(), np.bincount(dn[cross]).max()))
    return bool((~cross).any()), inter


def step_terms(topo: Topology, alphas: float, msg: float, flows: tuple[bool, int]) -> list[Term]:
    intra, inter = flows
    return [
        Term("intra", alphas, alphas * msg, msg) if intra else None,
        Term("inter", alphas, alphas * msg * inter, msg) if inter else None,
    ]


def complete_links(links: Links, topo: Topology) -> dict:
    """Every class the topology crosses has a link: one the run never crossed is taken equal to the other."""
    out = dict(links)
    for c in CLASSES:
        if c not in out:
            other = next(iter(out.values()))
            out[c] = dataclasses.replace(
                other, link_class=c, source=f"not measured: taken equal to the {other.link_class} link ({other.source})"
            )
    return out


def json_num(x):
    return None if x is None else ("inf" if isinstance(x, float) and math.isinf(x) else x)
