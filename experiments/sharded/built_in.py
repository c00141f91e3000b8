"""The built-in model (experiments/sharded/workload.py's ``Net``) declared as a model of your own, and what its
shapes let the experiment model of its cases (``BuiltIn``; a model of your own's counterpart: train.Yours). One
trainer, one pipeline trainer, one reference, one check rule and one set of inventory fields take either."""

from __future__ import annotations

import dataclasses

import torch.nn.functional as F

from suite.api import Bytes

from . import inventory, pipeline, workload
from .settings import ShardedSettings
from .strategies import get as strategy_of
from .user_model import UserModel

_THEORY_BYTES = "S bytes (nccl-tests' size) of every collective of one training step, by theory"
ISSUED = " (inventory_bytes: what the step issued)"
"""The byte model's definition ends so; the replay of the step's communication says what it issued instead."""


def built_in(width: int, depth: int, seq: int, global_batch: int) -> UserModel:
    """The built-in model as a model of your own (experiments/sharded/user_model.py): the seeded ``Net``, its
    seeded batches, mean-squared error, its plans (``tp``: ``up`` column-parallel and ``down`` row-parallel in
    every block; ``sp``: the same with the sequence sharded around them and a sequence-parallel LayerNorm, the
    sequence gathered before the head), each block an FSDP2 unit (the head stays with the root), its layers
    (the blocks, then the head) as a pipeline's pieces, and the 2 x depth + 1 Linears an activation passes as
    the layers that round it in bfloat16 (the LayerNorms normalise what they get)."""
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
        layers=2 * depth + 1,
    )


@dataclasses.dataclass(frozen=True)
class BuiltIn:
    """A case's built-in model: ``s``, the settings it runs on (a pipeline whose stages outnumber the layers
    SHARDED_DEPTH gives takes the blocks it needs: ShardedSettings.for_strategy, the record saying so in
    ``depth_raised_from``), ``asked_depth`` SHARDED_DEPTH; theory from the shapes alone (shapes.theory,
    pipeline.theory)."""

    s: ShardedSettings
    asked_depth: int

    def model(self) -> UserModel:
        """A new seeded model (each trainer and the reference train a copy)."""
        return built_in(self.s.width, self.s.depth, self.s.seq, self.s.batch)

    def n_params(self) -> int:
        return inventory.n_params(self.s.width, self.s.depth)

    def cannot_run(self, strategy: str, world: int) -> str | None:
        s = self.s
        why = workload.cannot_run(strategy, world, s.width, s.seq, s.batch)
        return why or pipeline.cannot_run(strategy, world, s.depth, s.microbatches)

    def theory(self, strategy: str, world: int) -> list[dict]:
        """Every collective (a pipeline: every p2p op) one step of ``strategy`` issues, by theory."""
        s = self.s
        if strategy in pipeline.PIPELINES:
            return pipeline.theory(strategy, s.width, s.seq, s.batch, world, s.microbatches)
        return inventory.theory(strategy, s.width, s.depth, s.seq, s.batch, world)

    def step_bytes(self, strategy: str, world: int, time_includes: str) -> Bytes:
        """The byte model: S bytes of every collective theory says one step issues (the inventory's own total
        is recorded beside it); no single bus factor applies to a mix of collectives, so no busbw."""
        s = self.s
        if self.cannot_run(strategy, world):
            total = 0
        elif strategy in pipeline.PIPELINES:
            total = pipeline.theory_bytes(strategy, s.width, s.seq, s.batch, world, s.microbatches)
        else:
            total = sum(r["count"] * r["bytes"] for r in self.theory(strategy, world))
        return Bytes(
            size_bytes=total,
            count=total // 4,
            dtype="bfloat16+float32" if strategy_of(strategy).bf16 else "float32",
            bw_op=None,
            definition=_THEORY_BYTES + ISSUED,
            time_includes=time_includes,
        )

    def declared(self, strategy: str, world: int, time_includes: str) -> tuple[dict, Bytes, dict, dict]:
        """The case's (identity, byte model, fields, provenance) that are the model's: its shapes, theory's bytes,
        a pipeline's stages (pipeline.declared_fields)."""
        s = self.s
        identity = {"width": s.width, "depth": s.depth, "seq": s.seq, "batch": s.batch}
        fields = {
            "n_params": self.n_params(),
            "check": "every rank's whole parameters equal single-process training on the global batches (check_rule)",
        }
        provenance = {}
        if strategy in pipeline.PIPELINES:
            fields |= pipeline.declared_fields(strategy, s, world)
            provenance = pipeline.PROVENANCE
        if s.depth != self.asked_depth:
            fields["depth_raised_from"] = self.asked_depth
        return identity, self.step_bytes(strategy, world, time_includes), fields, provenance
