"""The ``Strategy`` record: everything the sharded experiment needs to know about one way of sharding a training
step, so that no other module asks a strategy for its name (tests/unit/test_sharded_strategies.py holds that rule).

Each product strategy is one file in experiments/sharded/strategies/ defining ``STRATEGY``, and one line in that
package's registry. Pure (no torch at import): the offline step model (experiments/sharded/model.py) reads the
records too. How a record is built into a trainer: experiments/sharded/train.py (the one trainer, of the built-in
model as of yours: built_in.py), with workload.py's ``parallelize``, and pipeline_train.py with pipeline.py (the
``pipeline`` strategies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from suite.api import NeedsRanks

DP, TP, PP = "dp", "tp", "pp"
"""Mesh-dimension names (what the inventory calls each process group)."""
TP_PLAN, SP_PLAN = "tp_plan", "sp_plan"
"""The plans a tensor-parallel strategy applies: the built-in model's own, or the UserModel field of that name."""


@dataclass(frozen=True, kw_only=True)
class Pipeline:
    """A ``torch.distributed.pipelining`` schedule: the model's layers cut into ``stages_per_rank`` x world
    contiguous stages, stage s on rank s mod world (experiments/sharded/pipeline.py)."""

    schedule: str
    """The schedule's class name in torch.distributed.pipelining."""
    stages_per_rank: int = 1
    cannot: Callable[[int, int], str | None] = lambda world, microbatches: None
    """Why the schedule cannot take ``microbatches`` at ``world`` ranks (naming SHARDED_MICROBATCHES), or None."""
    scale_grads: bool = True
    """Whether the schedule divides the micro-batches' summed gradients by their count."""
    targets_shift: bool = False
    """Whether the last stage gets each micro-batch's targets one micro-batch late (planted)."""


@dataclass(frozen=True, kw_only=True)
class Strategy:
    """One sharding strategy: its name, mesh, data-parallel size, what it cannot run and why, how it
    parallelizes a model, its inputs, its check terms and its theory where one exists."""

    name: str
    what: str
    """What runs (the README's strategy table)."""
    data: str
    """The data one rank takes (the README's table)."""
    mesh_dims: tuple[str, ...] = (DP,)
    """The device mesh's dimensions: one over the world, or (dp, tp) as 2 x world/2."""
    ddp: bool = False
    """DistributedDataParallel on the run's group (no mesh)."""
    fsdp: bool = False
    """FSDP2's ``fully_shard`` on the units and the root, over the dp dimension."""
    reshard_after_forward: bool = True
    """FSDP2's ``reshard_after_forward`` for the units (the root keeps FSDP2's default)."""
    param_dtype: str = "float32"
    """The dtype the step computes in (FSDP2's mixed-precision ``param_dtype``; the reduction stays float32)."""
    plan: str | None = None
    """The tensor-parallel plan applied on the tp dimension (TP_PLAN or SP_PLAN), or None."""
    pipeline: Pipeline | None = None
    exact_at_two: bool = False
    """Whether the check is exact at 1-2 ranks (two-term averages; experiments/sharded/check.py)."""
    theory: Callable[..., list[dict]] | None = None
    """``theory(d, depth, seq, batch, world)`` -> the built-in model's collectives of one step from the shapes
    (experiments/sharded/theory.py's row builders); None where the messages are derived elsewhere (pipelines)."""
    planted: str | None = None
    """Why this strategy is wrong on purpose (the check's own tests: experiments/sharded/strategies/planted.py)."""
    built_in_only: str | None = None
    """Why it runs on the built-in model only, or None."""
    after_backward: Callable | None = None
    """``after_backward(model, world)``, run between backward and the SGD step (planted)."""
    after_parallelize: Callable | None = None
    """``after_parallelize(net, mesh)`` on the built-in model once its plan is applied (planted)."""

    @property
    def sequence_parallel(self) -> bool:
        """Each rank takes its slice of the sequence, not of the rows."""
        return self.plan == SP_PLAN

    @property
    def bf16(self) -> bool:
        return self.param_dtype == "bfloat16"

    @property
    def two_d(self) -> bool:
        return len(self.mesh_dims) == 2

    def mesh(self, world: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """The device mesh's shape and dimension names at ``world`` ranks."""
        if self.two_d:
            return (2, world // 2), self.mesh_dims
        return (world,), self.mesh_dims

    def dp_size(self, world: int) -> int:
        """Data-parallel shards of the batch's rows (1: every rank takes every row)."""
        if DP not in self.mesh_dims:
            return 1
        return self.mesh(world)[0][self.mesh_dims.index(DP)]

    def mesh_cannot(self, world: int) -> str | None:
        """Why the mesh does not fit this world (2-D: 2 x world/2), or None."""
        if self.two_d and (world < 4 or world % 2):
            return NeedsRanks(
                4, f"{self.name} needs an even world of at least 4 ranks (a 2 x world/2 mesh), not {world}"
            )
        return None
