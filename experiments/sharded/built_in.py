"""The built-in model (experiments/sharded/workload.py's ``Net``) declared as a model of your own: what the one
trainer, pipeline trainer and reference take for it (experiments/sharded/buffers.py ``model_of``)."""

from __future__ import annotations

import torch.nn.functional as F

from . import workload
from .user_model import UserModel


def built_in(width: int, depth: int, seq: int, global_batch: int) -> UserModel:
    """The built-in model as a model of your own (experiments/sharded/user_model.py): the seeded ``Net``, its
    seeded batches, mean-squared error, its plans (``tp``: ``up`` column-parallel and ``down`` row-parallel in
    every block; ``sp``: the same with the sequence sharded around them and a sequence-parallel LayerNorm, the
    sequence gathered before the head), each block an FSDP2 unit (the head stays with the root) and its layers
    (the blocks, then the head) as a pipeline's pieces. One trainer, one pipeline trainer and one reference train
    it and any other model."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel

    return UserModel(
        module=workload.build_net(width, depth),
        batch=lambda step: workload.batch(step, global_batch, seq, width, "cpu"),
        loss=F.mse_loss,
        tp_plan={"blocks.*.up": ColwiseParallel(), "blocks.*.down": RowwiseParallel()},
        sp_plan={
            "blocks.*.norm": SequenceParallel(),
            "blocks.*.up": ColwiseParallel(input_layouts=Shard(1)),
            "blocks.*.down": RowwiseParallel(output_layouts=Shard(1)),
        },
        seq_dim=1,
        sp_gather="head",
        fsdp_units=tuple(f"blocks.{i}" for i in range(depth)),
        pp_layers=lambda net: [*net.blocks, net.head],
    )
