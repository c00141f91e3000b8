"""``barrier_cost``: the same loop of ring steps (ring.py) with and without a ``barrier`` after every
step; time is per step."""

from __future__ import annotations

from suite.case import Buffers, Case
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.ops.p2p.pattern import Pattern, Spec, Sweep, blank, buffers, make_case, pat, wrong_messages
from suite.ops.p2p.ring import ring_step
from suite.harness.timing import barrier

BARRIER_STEPS = 8
"""Ring steps per iteration in the barrier-cost loop."""


def build(ctx: DistContext, s: Spec) -> Buffers:
    dt, k, count = s.dt, s.steps, s.count
    n, me = ctx.world_size, ctx.rank
    sbufs = [pat(ctx, me, count, dt, offset=i * count) for i in range(k)]
    rbufs = [blank(ctx, count, dt) for _ in range(k)]
    with_barrier = s.variant == "barrier_each_step"

    def run():
        for i in range(k):
            ring_step(ctx, "isend_irecv", sbufs[i], rbufs[i])
            if with_barrier:
                barrier(ctx)

    return buffers(
        ctx,
        run,
        lambda: wrong_messages(ctx, rbufs, (me - 1) % n, count, dt),
        rbufs,
        sent=sbufs,
    )


def _declare(cfg: BenchConfig, n: int, sw: Sweep, experiment: str) -> list[Case]:
    k = BARRIER_STEPS
    return [
        make_case(
            PATTERN,
            Spec(pattern=PATTERN.name, variant=v, size_bytes=sz, dtype=sw.dtype, steps=k),
            f"{k} ring steps (isend/irecv)" + (", barrier after each" if v == "barrier_each_step" else ""),
            experiment=experiment,
            divisor=k,
            normalisation=f"iteration / {k}: time per step",
            fields={"barrier_each_step": v == "barrier_each_step"},
        )
        for sz in sw.ends
        for v in PATTERN.variants
    ]


PATTERN = Pattern(name="barrier_cost", variants=("no_barrier", "barrier_each_step"), build=build, declare=_declare)
