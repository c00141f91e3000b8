r"""Your own model in the sharded experiment: a worked example of a SHARDED_MODEL factory.

    make bench-cpu EXPERIMENTS=sharded SHARDED_MODEL=examples.sharded_model:build NPROC=2

runs this model under DDP, FSDP2 (resharding after forward and not) and tensor parallelism (its ``tp_plan``),
each step checked against one process training the same model on the same batches (docs/experiments.md,
"Your own model"). A factory takes no argument and returns a ``UserModel``; it is called after
``torch.manual_seed(0)``, so seeded layers give the same weights on the host, every rank and the reference.

``build_unreduced`` is the same model with a wrong plan: its row-parallel layer leaves its output ``Partial``
(each rank's partial sum, the all_reduce forgotten), so every rank trains on wrong activations; the check
fails it and the run exits 6.

``build_pipeline`` is a deeper model (a Linear in, four residual layers, a Linear out) that also names
``pp_layers``, its forward's six pieces in order, so it also runs the pipeline schedules, its pieces cut into
contiguous stages:

    make bench-cpu EXPERIMENTS=sharded SHARDED_MODEL=examples.sharded_model:build_pipeline \
        SHARDED_STRATEGIES=pp_gpipe,pp_1f1b,pp_interleaved NPROC=2

``build_sequence`` is a sequence model (pre-norm residual layers on (rows, SEQ, WIDTH) inputs) with an
``sp_plan`` as well, so it also runs sequence parallel:

    make bench-cpu EXPERIMENTS=sharded SHARDED_MODEL=examples.sharded_model:build_sequence \
        SHARDED_STRATEGIES=sp,tp NPROC=2

each rank normalises its slice of the sequence (``SequenceParallel``), the Linear pair gathers the sequence and
scatters it back; ``build_sequence_unreduced_norm`` forgets the norm's ``SequenceParallel`` (the classic sequence
parallel bug: each rank's norm weights get the gradient of its own slice only, never reduced): it fails the
check and exits 6.
"""

import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import Partial, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel

from experiments.sharded.user_model import UserModel

WIDTH, HIDDEN, LAYERS, ROWS = 16, 64, 2, 8
SEQ = 8
"""Positions of build_sequence's inputs (dim 1), split over the ranks under sp."""


class Residual(nn.Module):
    """x + out(relu(inp(x))): a Linear pair whose first is column-parallel and second row-parallel under TP."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(WIDTH, HIDDEN)
        self.out = nn.Linear(HIDDEN, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.out(torch.relu(self.inp(x)))


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Residual() for _ in range(LAYERS))  # FSDP2: one unit per layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of a step: ROWS samples, the same for the same step everywhere."""
    g = torch.Generator().manual_seed(step)
    return torch.randn(ROWS, WIDTH, generator=g), torch.randn(ROWS, WIDTH, generator=g)


def build() -> UserModel:
    return UserModel(
        module=Regressor(),
        batch=batch,
        loss=F.mse_loss,
        tp_plan={"layers.*.inp": ColwiseParallel(), "layers.*.out": RowwiseParallel()},
    )


def build_unreduced() -> UserModel:
    """Wrong on purpose: the row-parallel output stays Partial (no all_reduce)."""
    plan = {"layers.*.inp": ColwiseParallel(), "layers.*.out": RowwiseParallel(output_layouts=Partial())}
    return UserModel(module=Regressor(), batch=batch, loss=F.mse_loss, tp_plan=plan)


class PreNorm(Residual):
    """x + out(relu(inp(norm(x)))): a Residual with a LayerNorm in front, as a transformer block's MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.out(torch.relu(self.inp(self.norm(x))))


class Sequencer(Regressor):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(PreNorm() for _ in range(LAYERS))


def sequence_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of a step: ROWS sequences of SEQ positions."""
    g = torch.Generator().manual_seed(step)
    return torch.randn(ROWS, SEQ, WIDTH, generator=g), torch.randn(ROWS, SEQ, WIDTH, generator=g)


SP_PLAN = {
    "layers.*.norm": SequenceParallel(),  # each rank normalises its slice; the norm's gradients are reduced
    "layers.*.inp": ColwiseParallel(input_layouts=Shard(1)),  # gathers the sequence
    "layers.*.out": RowwiseParallel(output_layouts=Shard(1)),  # reduce-scatters it back to the slices
}


def build_sequence() -> UserModel:
    return dataclasses.replace(build(), module=Sequencer(), batch=sequence_batch, sp_plan=SP_PLAN, seq_dim=1)


def build_sequence_unreduced_norm() -> UserModel:
    """Wrong on purpose: the norm is not SequenceParallel, so its gradient comes from this rank's slice only."""
    plan = {k: v for k, v in SP_PLAN.items() if not k.endswith("norm")}
    return dataclasses.replace(build_sequence(), sp_plan=plan)


DEEP = 4
"""Residual layers of build_pipeline's model."""


class Stacked(nn.Module):
    """A Linear in, DEEP residual layers, a Linear out: six pieces for the pipelines to cut into stages."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(WIDTH, WIDTH)
        self.layers = nn.ModuleList(Residual() for _ in range(DEEP))
        self.head = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def pieces(model: Stacked) -> list[nn.Module]:
    """Stacked's forward in order (UserModel.pp_layers): what the pipelines cut into stages."""
    return [model.embed, *model.layers, model.head]


def build_pipeline() -> UserModel:
    """The example's batches, loss and tp_plan (its layers are Residuals too) on Stacked, with its pieces."""
    return dataclasses.replace(build(), module=Stacked(), pp_layers=pieces)
