"""What a hello case runs on one rank: the all_reduce of the rank's number plus one, and its exact check."""

from __future__ import annotations

import torch
import torch.distributed as dist

from suite.api import Buffers, restorer


def all_reduce_buffers(count: int):
    """The builder of one case: ``build(ctx, session) -> Buffers`` for ``count`` float32 elements (``session``:
    what cases share for the process group's life, e.g. ``session.once(key, factory)``; unused here)."""

    def build(ctx, session) -> Buffers:
        x = torch.full((count,), float(ctx.rank + 1), device=ctx.device)
        want = ctx.world_size * (ctx.world_size + 1) / 2  # 1 + 2 + ... + n, exact in float32
        return Buffers(
            call=lambda async_op: dist.all_reduce(x, group=ctx.group, async_op=async_op),
            check=lambda: int((x != want).sum()),
            outputs=lambda: (x,),
            reset=restorer(x),  # all_reduce works in place: each sample starts from the same input
        )

    return build
