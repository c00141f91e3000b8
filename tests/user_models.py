"""Models of your own for the sharded experiment's tests (SHARDED_MODEL factories), beside examples/sharded_model.py.

``normed``: the worked example's model ending in a LayerNorm, as a transformer ends in its final norm. Its norm
holds parameters of its own: FSDP2 shards it as one more unit, TP leaves it replicated, and under bfloat16
parameters it rounds the activation once more, a term the bfloat16 rule counts
(experiments/sharded/train.py ``layers``). ``deep_normed``: the same on the pipeline example's model, whose
seven pieces (pp_layers) fill four pipeline stages.
"""

import dataclasses

import torch
import torch.nn as nn

from examples import sharded_model
from experiments.sharded.user_model import UserModel


class Normed(sharded_model.Regressor):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(sharded_model.WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(super().forward(x))


def normed() -> UserModel:
    """The worked example's factory (its batches, loss and tp_plan) with ``Normed`` as the module."""
    return dataclasses.replace(sharded_model.build(), module=Normed())


class DeepNormed(sharded_model.Stacked):
    """The pipeline example's model (a Linear in, four residual layers, a Linear out) ending in a LayerNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(sharded_model.WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(super().forward(x))


def deep_normed() -> UserModel:
    """The pipeline example's factory with ``DeepNormed``: seven pieces (the norm last), enough for four stages."""
    return dataclasses.replace(
        sharded_model.build_pipeline(), module=DeepNormed(), pp_layers=lambda m: [*sharded_model.pieces(m), m.norm]
    )


def built_in_twin() -> UserModel:
    """The built-in model family as your own model, at make validate-predict's shape (VALIDATE_SHARDED_WIDTH=60,
    _DEPTH=2, _SEQ=4, _BATCH=60) with the built-in tp plan (each block's ``up`` column-, ``down`` row-parallel):
    ``make validate-predict SHARDED_MODEL=tests.user_models:built_in_twin`` checks a user model's prediction (its
    measured inventory priced at N) on the steps whose theory-based prediction the built-in validation checks."""
    import torch.nn.functional as F
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    from experiments.sharded import workload

    width, depth, seq, rows = 60, 2, 4, 60
    return UserModel(
        module=workload.build_net(width, depth),
        batch=lambda step: workload.batch(step, rows, seq, width, "cpu"),
        loss=F.mse_loss,
        tp_plan={"blocks.*.up": ColwiseParallel(), "blocks.*.down": RowwiseParallel()},
    )


def built_in_rule(strategy: str, world: int, depth: int, width: int, microbatches: int = 1):
    """The check rule on the built-in model of ``width`` and ``depth`` (the one rule, train.check_rule, reads its
    numbers off the model: ``down``'s 4d contraction, 2 x depth + 1 layers)."""
    from experiments.sharded import built_in, train

    return train.check_rule(strategy, world, built_in.built_in(width, depth, 4, 4), microbatches)


def built_in_reference(width: int, depth: int, seq: int, batch: int, dp: int, bf16: bool = False):
    """The one reference (train.reference) of the built-in model on CPU."""
    from experiments.sharded import built_in, train

    return train.reference(built_in.built_in(width, depth, seq, batch), dp, "cpu", bf16)
