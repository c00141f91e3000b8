"""The ring model: an op's time over one link of latency α and bandwidth β.

Ring algorithms (Thakur, Rabenseifner, Gropp, "Optimization of Collective
Communication Operations in MPICH", IJHPCA 2005; Chan et al., "Collective
communication: theory, practice, and experience", 2007) cost, for n ranks on
links of latency α and bandwidth β:

    all_reduce            2(n-1)·α + 2(n-1)/n · S/β   (reduce-scatter + all-gather rings)
    all_gather,
    reduce_scatter,
    all_to_all, gather,
    scatter               (n-1)·α  +  (n-1)/n · S/β
    broadcast, reduce     (n-1)·α  +  S/β             (pipelined chain)
    send_recv             α + S/β

(all_to_all is a pairwise exchange and gather/scatter a linear one rather than a
ring, with the same step count and volume; "ring model" below covers them too.)

The bandwidth coefficient is exactly nccl-tests' busbw factor
(suite.metrics), so β of the *link* implied by an op's fit equals the op's
asymptotic busbw. The α coefficient is the op table's ``ring_latency_steps`` (suite.metrics).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from suite import metrics


@dataclass(frozen=True, kw_only=True)
class Link:
    """Per-link α and β (what a ring algorithm's steps each cost)."""

    alpha_us: float
    beta_gbps: float
    source: str
    """How it was obtained (e.g. 'p2p send_recv fit', 'median over collectives')."""


def ring_coefficients(op: str, world_size: int) -> tuple[float, float] | None:
    """(latency steps, bandwidth factor) of the ring algorithm for ``op``; None if unmodelled."""
    steps = metrics.ring_latency_steps(op, world_size)
    if steps is None or world_size < 2:
        return None
    return steps, metrics.busbw_factor(op, world_size)


def ring_time_us(op: str, world_size: int, link: Link, size_bytes):
    """Ring-model time in µs of ``op`` at ``size_bytes`` over ``link``; None if unmodelled."""
    c = ring_coefficients(op, world_size)
    if c is None:
        return None
    a, b = c
    s = np.asarray(size_bytes, dtype=float)
    return a * link.alpha_us + b * s / (link.beta_gbps * 1e3)


def implied_link(op: str, world_size: int, fit) -> Link | None:
    """The link α, β that would make the ring model reproduce ``fit`` (a suite.model.fit.AlphaBeta) exactly."""
    c = ring_coefficients(op, world_size)
    if c is None or c[0] <= 0 or c[1] <= 0:
        return None
    a, b = c
    return Link(alpha_us=fit.alpha_us / a, beta_gbps=fit.beta_gbps * b, source=f"{op} fit")
