"""``ring``: send to next, receive from previous (nccl-tests ``sendrecv_perf``), with blocking
``send``/``recv`` in parity order, with ``isend``/``irecv``, and with ``batch_isend_irecv`` (the orderings
of suite/ops/algorithms.py). The doctor's ring probe is this ring (``ring_case``); the barrier-cost loop
is made of its steps (``ring_step``)."""

from __future__ import annotations

import torch

from suite.harness import verify
from suite.case import Buffers, Case
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.ops import algorithms
from suite.ops.p2p.pattern import Pattern, Spec, Sweep, blank, buffers, cross, make_case, pat


def ring_step(ctx: DistContext, variant: str, sbuf: torch.Tensor, rbuf: torch.Tensor) -> None:
    """Send to rank+1 while receiving from rank-1, with ``variant`` (one of algorithms.ORDERINGS)."""
    me, n = ctx.rank, ctx.world_size
    algorithms.exchange(sbuf, rbuf, (me + 1) % n, (me - 1) % n, ctx.group, variant)


def build(ctx: DistContext, s: Spec) -> Buffers:
    dt, count = s.dt, s.count
    n, me = ctx.world_size, ctx.rank
    sbuf, rbuf = pat(ctx, me, count, dt), blank(ctx, count, dt)
    return buffers(
        ctx,
        lambda: ring_step(ctx, s.variant, sbuf, rbuf),
        lambda: verify.count_wrong(rbuf, pat(ctx, (me - 1) % n, count, dt)),
        [rbuf],
        sent=[sbuf],
        cross_node_links=sum(cross(ctx, r, (r + 1) % n) for r in range(n)),
    )


def ring_case(variant: str, size_bytes: int, dtype: str, *, experiment: str) -> Case:
    """Send to rank+1 while receiving from rank-1, with ``variant`` (one of the pattern's variants)."""
    return make_case(
        PATTERN,
        Spec(pattern=PATTERN.name, variant=variant, size_bytes=size_bytes, dtype=dtype),
        "every rank sends to rank+1 and receives from rank-1",
        experiment=experiment,
    )


def _declare(cfg: BenchConfig, n: int, sw: Sweep, experiment: str) -> list[Case]:
    return [ring_case(v, sz, sw.dtype, experiment=experiment) for v in PATTERN.variants for sz in sw.sizes]


PATTERN = Pattern(name="ring", variants=algorithms.ORDERINGS, build=build, declare=_declare)
