"""What the affinity cases run on one rank: all_reduce with every thread of the rank pinned to one core vs
the inherited mask (``Pinning``: pinned when built, restored and checked after every check)."""

from __future__ import annotations

import math
import os

import torch
import torch.distributed as dist

from suite.api import (
    BenchConfig,
    Buffers,
    CaseFailed,
    DistContext,
    Session,
    affinity,
    restorer,
    verify,
)


class Pinning:
    """One affinity case's pinning, shared by its buffer sets: the first build pins, the first check
    after it restores; every check then verifies, on every rank, that the process finds its masks as
    before the case."""

    def __init__(self, pinning: str):
        self.pinning = pinning
        self.saved: affinity.SavedAffinity | None = None
        self.before: list[int] | None = None
        self.fields: dict = {}

    def apply(self, ctx: DistContext) -> dict:
        if self.saved is None:
            cpus = sorted(os.sched_getaffinity(0))
            core = cpus[ctx.local_rank % len(cpus)]
            self.before = cpus
            self.saved = (
                affinity.pin_process(core)
                if self.pinning == "pinned"
                else affinity.SavedAffinity(masks={}, default_mask=frozenset(cpus))
            )
            pinned = self.pinning == "pinned"
            # this rank's view (the record is rank 0's): its core, its CPU count; the torch thread count is
            # context only (it sizes ATen's pool, not Gloo's workers)
            self.fields = {
                "torch_threads": torch.get_num_threads(),
                "cpus_available": len(cpus),
                "pinned_core": core if pinned else None,
                "ranks_per_core": math.ceil(ctx.local_world_size / len(cpus)) if pinned else None,
            }
        return self.fields

    def undo(self) -> None:
        """Put the masks back (no collective: also safe when the case fails or skips)."""
        if self.saved is not None:
            affinity.restore(self.saved)
            self.saved = None

    def restore(self, ctx: DistContext) -> None:
        self.undo()
        leaked = sorted(os.sched_getaffinity(0)) != self.before
        if not ctx.agree_all(not leaked):
            raise CaseFailed("the CPU affinity was not restored after the case")


def affinity_build(pin: Pinning, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext, session: Session) -> Buffers:
        fields = pin.apply(ctx)
        t = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=ctx.device, seed=ctx.seed)

        def check() -> int:
            wrong = verify.count_wrong(
                t, verify.reduce_expected("sum", ctx.world_size, count, dt, device=ctx.device, seed=ctx.seed)
            )
            pin.restore(ctx)  # the case's teardown: the next buffer set (or case) starts unpinned
            return wrong

        return Buffers(
            call=lambda a: dist.all_reduce(t, group=ctx.group, async_op=a),
            check=check,
            outputs=lambda: [t],
            reset=restorer(t),
            fields=dict(fields),
            release=pin.undo,
        )

    return build


def affinity_skip(ctx: DistContext, cfg: BenchConfig) -> str | None:
    if not ctx.agree_all(hasattr(os, "sched_setaffinity")):
        return "os.sched_setaffinity is not available on this platform"
    return None
