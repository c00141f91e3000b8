"""Strategies wrong on purpose: the sharded check's own tests. Not in the product's list (``SHARDED_STRATEGIES``
runs them only by name, and every record says ``planted``); each is a product strategy with one fault planted
the way real bugs make it, checked under the rule of the strategy it imitates, which it fails (status 6):

- ``fsdp2_scaled``: FSDP2 whose gradient shards are multiplied by the world size before the SGD step (a sum
  where the average belongs);
- ``tp_wrong_shard``: TP whose ``up`` weight shard on each rank is the next rank's rows (the built-in model);
- ``pp_unscaled``: GPipe that does not divide the micro-batches' summed gradients by their count;
- ``pp_misrouted``: GPipe whose last stage gets each micro-batch's targets one micro-batch late.
"""

from __future__ import annotations

import dataclasses

from ..strategy import Strategy
from .fsdp2 import STRATEGY as FSDP2
from .pp_gpipe import STRATEGY as GPIPE
from .tp import STRATEGY as TP


def _sum_not_average(model, world: int) -> None:
    import torch

    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(world)


def _next_rank_rows(net, mesh) -> None:
    import torch

    torch.manual_seed(0)  # the built-in model's seeded weights (workload.build_net), whole
    full = type(net)(net.head.in_features, len(net.blocks)).blocks
    n, r = mesh.size(), mesh.get_local_rank()
    with torch.no_grad():
        for b, ref in zip(net.blocks, full):
            b.up.weight.to_local().copy_(ref.up.weight.chunk(n)[(r + 1) % n])


def _two_microbatches(world: int, microbatches: int) -> str | None:
    if microbatches < 2:  # with one micro-batch there is no other to take
        return f"pp_misrouted needs SHARDED_MICROBATCHES >= 2, not {microbatches}"
    return None


def _planted(base: Strategy, name: str, why: str, **changes) -> Strategy:
    return dataclasses.replace(base, name=name, what=f"{base.name}, wrong on purpose: {why}", planted=why, **changes)


_gpipe = GPIPE.pipeline
STRATEGIES = (
    _planted(FSDP2, "fsdp2_scaled", "gradient shards multiplied by the world size", after_backward=_sum_not_average),
    _planted(
        TP,
        "tp_wrong_shard",
        "each rank holds the next rank's `up` rows",
        after_parallelize=_next_rank_rows,
        built_in_only="it plants a wrong shard into the built-in model",
    ),
    _planted(
        GPIPE,
        "pp_unscaled",
        "gradients not divided by the micro-batches",
        pipeline=dataclasses.replace(_gpipe, scale_grads=False),
    ),
    _planted(
        GPIPE,
        "pp_misrouted",
        "the last stage's targets one micro-batch out of step with the inputs",
        pipeline=dataclasses.replace(_gpipe, targets_shift=True, cannot=_two_microbatches),
    ),
)
