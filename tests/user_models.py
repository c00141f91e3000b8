"""Models of your own for the sharded experiment's tests (SHARDED_MODEL factories), beside examples/sharded_model.py.

``normed``: the worked example's model ending in a LayerNorm, as a transformer ends in its final norm. Its norm
holds parameters of its own: FSDP2 shards it as one more unit, TP leaves it replicated, and under bfloat16
parameters it rounds the activation once more, a term the bfloat16 rule counts
(experiments/sharded/user_workload.py ``layers``).
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
