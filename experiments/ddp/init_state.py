"""The ddp experiment's init cases on one rank: the initial-state sync (per-tensor broadcast from rank 0, or DDP's
constructor) from a state of each rank's own, checked against rank 0's."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from suite.api import Buffers, DistContext, verify

from .settings import DdpSettings
from .workload import Variant, build_model, peak_fields, state_tensors


def init_buffers(v: Variant, ctx: DistContext, settings: DdpSettings) -> Buffers:
    """Initial-state broadcast: every rank starts from weights of its own, drawn for this check repetition
    (``init_seed``); afterwards every rank must hold rank 0's."""
    reference = torch.cat([t.detach().reshape(-1).float() for t in state_tensors(_init_model(v, ctx, settings, 0))])
    module = _init_model(v, ctx, settings, ctx.rank)

    if not v.kind.ddp_wrapped:

        def sync(a: bool):
            # What the article describes: broadcast is how rank 0's initial state reaches the others.
            for t in state_tensors(module):
                dist.broadcast(t.detach(), src=0, group=ctx.group)
    else:

        def sync(a: bool):
            kw = {"device_ids": [ctx.device.index]} if ctx.device.type == "cuda" else {}
            DDP(module, process_group=ctx.group, **kw)  # construction broadcasts rank 0's state

    def check() -> int:
        return verify.count_wrong(torch.cat([t.detach().reshape(-1).float() for t in state_tensors(module)]), reference)

    return Buffers(
        call=sync,
        check=check,
        outputs=lambda: [t.detach() for t in state_tensors(module)],
        derive=lambda m, around, session: peak_fields(ctx, around),
    )


def _init_model(v: Variant, ctx: DistContext, settings: DdpSettings, rank: int) -> nn.Module:
    """Rank ``rank``'s model in the init cases: its own state, new each check repetition (``ctx.seed``), every
    parameter and buffer drawn (a BatchNorm's ones and zeros would be the same in every repetition), so that a state
    left from an earlier sync is wrong here."""
    seed = ctx.seed * 2**20 + rank
    module = build_model(v.model, settings, seed=seed).to(ctx.device)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in state_tensors(module):
            drawn = (
                torch.randn(t.shape, generator=g)
                if t.is_floating_point()
                else torch.randint(1 << 20, t.shape, generator=g)
            )
            t.copy_(drawn.to(t.dtype))
    return module
