"""The one pipeline trainer: a ``UserModel`` (your own, ``SHARDED_MODEL``, or the built-in model declared as one,
built_in.py) under the pipeline schedules: its ``pp_layers`` (the forward's pieces, checked on the host:
user_pieces.pp_problem) cut into contiguous stages, built, run, checked and inventoried by
experiments/sharded/pipeline.py.

Theory (``theory``): what each stage boundary carries for one micro-batch, measured by running the first
micro-batch of ``batch(0)`` through a copy of the pieces on this rank (user_pieces.outputs, no communication): the
activation's bytes and dtype forward, a gradient of the same shape back (every boundary requires grad:
user_pieces.stages_problem), once per micro-batch.
"""

from __future__ import annotations

import torch

from suite.api import Bytes

from . import pipeline, workload
from .user_model import UserModel, cannot_run
from .user_pieces import outputs
from .train import fresh


def make_trainer(strategy: str, ctx, loaded: UserModel, microbatches: int) -> pipeline.PipelineTrainer:
    """This rank's stages of a copy of the loaded model (pipeline.build_trainer), its batches and loss."""
    um = fresh(loaded)
    net = um.module.to(ctx.device)
    batches = [tuple(t.to(ctx.device) for t in um.batch(k)) for k in range(workload.BATCHES)]
    return pipeline.build_trainer(strategy, ctx, net, list(um.pp_layers(net)), batches, um.loss, microbatches)


def _bounds(um: UserModel, strategy: str, world: int) -> list[tuple[int, int]]:
    stages = world * pipeline.stages_per_rank(strategy)
    return pipeline.stage_bounds(len(um.pp_layers(um.module)), stages)


def boundaries(um: UserModel, strategy: str, world: int, microbatches: int) -> list[tuple[int, str]]:
    """(bytes, dtype) of the activation each stage boundary carries for one micro-batch (module docstring); []
    where the strategy cannot run here."""
    if cannot_run(um, strategy, world, microbatches):
        return []
    out = outputs(um, microbatches)
    return [out[end - 1][:2] for _, end in _bounds(um, strategy, world)[:-1]]


def theory(um: UserModel, strategy: str, world: int, microbatches: int) -> list[dict]:
    """Every rank's p2p ops of one step (pipeline.boundary_theory over ``boundaries``)."""
    return pipeline.boundary_theory(world, microbatches, boundaries(um, strategy, world, microbatches))


def step_bytes(sent: list[tuple[int, str]], world: int, microbatches: int, time_includes: str) -> Bytes:
    """S bytes of every message of one step by theory, from the stage boundaries' activations ``sent``
    (``boundaries``: each message once; 0 where the strategy cannot run here)."""
    total = sum(pipeline.sent_bytes(pipeline.boundary_theory(world, microbatches, sent)).values())
    elements = sum(2 * microbatches * n // getattr(torch, d).itemsize for n, d in sent)
    dtypes = sorted({d for _, d in sent}) or ["float32"]
    return Bytes(
        size_bytes=total,
        count=elements,
        dtype="+".join(dtypes),
        bw_op=None,
        definition="S bytes of every point-to-point message of one training step, by theory (pipeline_train.theory: "
        "the boundaries' activations from one micro-batch through the pieces); inventory_bytes: what the step sent",
        time_includes=time_includes,
    )


def declared_fields(strategy: str, um: UserModel, world: int, microbatches: int, sent: list[tuple[int, str]]) -> dict:
    """A pipeline case's fields on the user's model: the stages' pieces, each boundary's bytes (``sent``:
    ``boundaries``, [] where the strategy cannot run here, which has no stages) and the largest."""
    sizes = [n for n, _ in sent]
    bounds = _bounds(um, strategy, world) if sent else []
    fields = pipeline.stage_fields(strategy, world, microbatches, bounds, max(sizes, default=0))
    return fields | {"boundary_bytes": sizes}


PROVENANCE = {
    "theory": "modelled: experiments.sharded.pipeline_train.theory, each stage boundary's activation (bytes, dtype) "
    "from the first micro-batch of batch(0) through the model's pp_layers on one rank, once forward and once "
    "backward per micro-batch",
    "theory_bytes": "derived: 2 x micro-batches x the sum of boundary_bytes",
    "activation_bytes": "modelled: the largest of boundary_bytes",
    "boundary_bytes": "modelled: bytes of the activation each stage boundary carries for one micro-batch (theory)",
}
