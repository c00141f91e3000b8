"""Model parallelism as the source article describes it: one large linear layer split across ranks,
and a pipeline of stages (rank i -> i+1) with real work per stage.

**The split layer.** The weight ``W`` (out × in) lives on rank 0; ``scatter`` gives rank r the rows
``W[r·out/n:(r+1)·out/n]``; every rank computes its slice of the output ``x W_rᵀ`` for
the whole batch, and the slices are combined with ``all_gather`` (every rank gets the
full output) or ``gather`` (rank 0 gets it). Compared in the same run with the
data-parallel step for the same layer and the same global batch.

Cases (layer ``MP_IN`` × ``MP_OUT``, default 2048 × 2048 = 16 MB float32; global
batch ``MP_BATCH``, default 64; sizes must divide by the world size):

- ``scatter``: distributing the weight (size = the whole weight), checked exactly.
- ``mp_forward_all_gather`` / ``mp_forward_gather``: local matmul + combine (size = the
  whole output, B·out·4 bytes). Inputs and weights are small integers (−2..2), so the
  split result must equal the unsplit ``x Wᵀ`` exactly (sums stay far below 2^24).
- ``mp_train_step``: forward + all_gather + MSE loss + backward + SGD on each rank's
  rows. No gradient communication: the input is replicated, and each rank's weight rows
  get their gradient from their own output slice.
- ``dp_train_step``: the same layer under DDP, the global batch split across ranks:
  the all_reduce carries the whole weight gradient (out·in·4 bytes) instead of the
  B·out·4 bytes of activations that model parallelism moves.

Both train steps are checked against one unsplit single-process step computed in float64 with the
rule of ``train_check_rule``: weights, inputs and targets are integers (−2..2) and the learning rate
is 2^-6, so where the MSE mean (and DDP's average over ranks) divides by a power of two and every
partial sum stays below 2^24, float32 computes the step exactly and the check is ``==``; otherwise
each element may differ by the forward error bound the rule derives from float32's unit roundoff and
the number of roundings behind it (recorded as ``check``, ``check_exact``, ``check_max_tolerance``).

**The pipeline.** S = world stages; stage s applies its layer ``y = x·W_s + 1`` to each micro-batch
(``MP_MICROBATCH_ROWS`` × ``MP_STAGE_FEATURES`` float32, defaults 128 × 512: a 512 × 512 matmul per
micro-batch, which on CPU Gloo costs about as long as sending the 256 KB micro-batch to the next
stage). ``W_s`` is a dense matrix holding a permutation, so the matmul does all its d² work per row
while the values stay small integers and the last stage's output is checked exactly against the
unsplit model (every layer applied in one process). Measured in the same run:

- ``pipeline_compute``: one stage's layer on one micro-batch, every rank at once (c);
- ``pipeline_transfer``: one micro-batch relayed 0 -> 1 -> ... -> S−1 with blocking send/recv and no
  compute, time per hop (τ = relay / (S−1));
- ``pipeline_blocking`` (M = 1, 2, 4, 8): GPipe fill/drain, forward only, over blocking send/recv;
- ``pipeline_overlap`` (M = 1, 2, 4, 8): the same with ``irecv`` of the next micro-batch posted before
  the current one's compute and ``isend`` of each result, so transfers overlap compute.

Each pipeline record carries its schedule's model (``pipeline_time_s``) evaluated at this run's c and
τ, and the bubble with one definition for the measurement, the model and the compute-only ideal:
``bubble = 1 − M·c / T``, the share of the pipeline time T a stage does not compute.

Every case is a declared ``suite.case.Case`` run by the harness (suite/harness/runner.py). The train
steps restore the initial weight before each timed sample (``reset``), so the check after the
timed steps is the same one-step check. ``samples_per_s`` (train steps) = global batch / the
median of the case's own timed samples.
"""

from __future__ import annotations

import dataclasses

from suite.api import BenchConfig, Buffers, Bytes, Case, DistContext, NeedsRanks, Session, Timing, experiment_test

from .check import LR, train_check_rule
from .derived import PIPELINE_PROVENANCE, TRAIN_PROVENANCE, pipeline_fields, stage_keys, with_samples_per_s
from .model import PIPELINE_MODELS
from .settings import ModelParallelSettings
from .workload import (
    MICROBATCHES,
    compute_buffers,
    dp_train_buffers,
    forward_buffers,
    mp_train_buffers,
    pipeline_buffers,
    relay_buffers,
    scatter_buffers,
    stage_repeats,
)

EXPERIMENT = "model_parallel"


OPS = ("scatter", "mp_forward_all_gather", "mp_forward_gather", "mp_train_step", "dp_train_step")


SCHEDULES = ("blocking", "overlap")


def _one_stage_each(ctx: DistContext, cfg: BenchConfig) -> str | None:
    return NeedsRanks(2, "the pipeline needs at least 2 ranks (one stage each)") if ctx.world_size < 2 else None


def _offering(build, offer):
    """``build``'s buffers, whose own timed Measurement is offered as c or τ to the pipeline cases."""

    def with_offer(ctx: DistContext, session: Session) -> Buffers:
        def derive(m, around, session: Session) -> dict:
            offer(ctx, session, m)
            return {}

        return dataclasses.replace(build(ctx), derive=derive)

    return with_offer


def _stage_cases(pipe, n: int, k: int, mb: int, common: dict) -> list[Case]:
    """c and τ alone: one stage's compute and one hop's transfer, each ``k`` times back to back."""
    return [
        Case(
            experiment=EXPERIMENT,
            op="pipeline_compute",
            label="pipeline_compute",
            identity={"variant": "pipeline_compute"},
            bytes=Bytes(
                size_bytes=0, count=0, dtype="float32", bw_op=None, definition="none: one stage's matmul, no bytes move"
            ),
            build=_offering(
                lambda ctx: compute_buffers(pipe, ctx, k),
                lambda ctx, session, m: session.once(stage_keys(pipe, ctx)[0], lambda: m),
            ),
            timing=Timing(
                mode="blocking",
                divisor=k,
                normalisation=f"{k} stage computes back to back (stage_repeats) / {k}: one stage's compute",
            ),
            skip=_one_stage_each,
            fields={**common, "stage_repeats": k, "check": "exact: x W_s + 1 equals the column roll of x plus 1"},
        ),
        Case(
            experiment=EXPERIMENT,
            op="pipeline_transfer",
            label="pipeline_transfer",
            identity={"variant": "pipeline_transfer"},
            bytes=Bytes(
                size_bytes=mb,
                count=mb // 4,
                dtype="float32",
                bw_op="send_recv",
                definition="one micro-batch (rows x d x 4 B) over one hop",
            ),
            build=_offering(
                lambda ctx: relay_buffers(pipe, ctx, k),
                lambda ctx, session, m: session.once(stage_keys(pipe, ctx)[1], lambda: m),
            ),
            timing=Timing(
                mode="blocking",
                divisor=k * max(n - 1, 1),
                normalisation=f"{k} relays through {n} stages back to back (stage_repeats) / ({k} x {max(n - 1, 1)} "
                "hops): time of one hop",
            ),
            skip=_one_stage_each,
            fields={**common, "stage_repeats": k, "check": "exact: the last stage receives stage 0's micro-batch"},
        ),
    ]


def _pipeline_case(pipe, schedule: str, m: int, mb: int, common: dict) -> Case:
    """The whole pipeline under ``schedule``: ``m`` micro-batches through every stage."""
    return Case(
        experiment=EXPERIMENT,
        op=f"pipeline_{schedule}",
        label=f"pipeline_{schedule}-M{m}",
        identity={"variant": f"pipeline_{schedule}", "microbatches": m},
        bytes=Bytes(
            size_bytes=m * mb,
            count=m * mb // 4,
            dtype="float32",
            bw_op="send_recv",
            definition="micro-batches x micro-batch bytes (what each hop carries)",
            time_includes="every stage's matmul of every micro-batch",
        ),
        build=lambda ctx, session: dataclasses.replace(
            pipeline_buffers(pipe, ctx, m, schedule),
            derive=lambda meas, around, session: pipeline_fields(pipe, ctx, m, schedule, meas, session),
        ),
        timing=Timing(
            mode="blocking", normalisation="none: time of the whole pipeline (M micro-batches through S stages)"
        ),
        skip=_one_stage_each,
        fields={
            **common,
            "schedule": schedule,
            "model": PIPELINE_MODELS[schedule],
            "check": "exact: the last stage's outputs equal the unsplit model's (every layer in one process)",
        },
        provenance=PIPELINE_PROVENANCE,
    )


def pipeline_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """c and τ alone, then both schedules for M = 1, 2, 4, 8 (knobs: MP_STAGE_FEATURES, MP_MICROBATCH_ROWS)."""
    pipe = cfg.model_parallel
    n = max(world_size, 1)
    mb = pipe.microbatch_rows * pipe.stage_features * 4
    k = stage_repeats(n)
    common = {
        "table": "pipeline",
        "stages": n,
        "stage_features": pipe.stage_features,
        "microbatch_rows": pipe.microbatch_rows,
        "microbatch_bytes": mb,
    }
    return _stage_cases(pipe, n, k, mb, common) + [
        _pipeline_case(pipe, schedule, m, mb, common) for schedule in SCHEDULES for m in MICROBATCHES
    ]


def _not_divisible(layer: ModelParallelSettings):
    def skip(ctx: DistContext, cfg: BenchConfig) -> str | None:
        n = ctx.world_size
        if layer.out_features % n or layer.batch % n:
            return f"MP_OUT={layer.out_features} and MP_BATCH={layer.batch} must divide by the world size {n}"
        return None

    return skip


TIME_INCLUDES = {
    "mp_forward_all_gather": "each rank's matmul of its rows",
    "mp_forward_gather": "each rank's matmul of its rows",
    "mp_train_step": "forward, backward and the SGD update",
    "dp_train_step": "forward, backward and the SGD update",
}
"""The compute inside the timed call of each split-layer op (scatter moves data only): their
bandwidths are effective rates (suite.case.Bytes.time_includes)."""


def model_parallel_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """The split layer's five ops (the knobs: MP_IN, MP_OUT, MP_BATCH), then the pipeline's cases."""
    layer = cfg.model_parallel
    n = max(world_size, 1)
    common = {
        "in_features": layer.in_features,
        "out_features": layer.out_features,
        "global_batch": layer.batch,
        "table": "model_parallel",
        "rows_per_rank": layer.out_features // n,
    }

    out = []
    for op, (size, bw_op, definition, build, fields) in _layer_specs(layer, n).items():
        train = op in ("mp_train_step", "dp_train_step")
        bytes_ = Bytes(
            size_bytes=size,
            count=size // 4,
            dtype="float32",
            bw_op=bw_op,
            definition=definition,
            time_includes=TIME_INCLUDES.get(op),
        )
        out.append(
            Case(
                experiment=EXPERIMENT,
                op=op,
                label=op,
                identity={"variant": op},
                bytes=bytes_,
                build=with_samples_per_s(build, layer) if train else build,
                timing=Timing(mode="blocking"),
                skip=_not_divisible(layer),
                fields={**common, **fields},
                provenance=TRAIN_PROVENANCE if train else {},
            )
        )
    return out + pipeline_cases(cfg, world_size)


def _train_fields(layer: ModelParallelSettings, n: int, split: str, grad_bytes: int) -> dict:
    rule = train_check_rule(layer, n, split)
    return {
        "check": rule.rule,
        "check_exact": rule.exact,
        "check_rounding_ops": rule.ops,
        "learning_rate": LR,
        "grad_comm_bytes": grad_bytes,
    }


def _layer_specs(layer: ModelParallelSettings, n: int) -> dict:
    """Per op of the split layer, in OPS' order: (bytes, the busbw op, what the bytes are, build, fields)."""
    w_bytes = layer.out_features * layer.in_features * 4
    y_bytes = layer.batch * layer.out_features * 4
    spec = {
        "scatter": (
            w_bytes,
            "scatter",
            "the whole weight (out x in x 4 B) rank 0 scatters",
            lambda ctx, session: scatter_buffers(layer, ctx),
            {"check": "exact rows of rank 0's weight"},
        ),
        "mp_forward_all_gather": (
            y_bytes,
            "all_gather",
            "the whole output (B x out x 4 B)",
            lambda ctx, session: forward_buffers(layer, ctx, "all_gather"),
            {"check": "exact: equals the unsplit x @ W.T on every rank"},
        ),
        "mp_forward_gather": (
            y_bytes,
            "gather",
            "the whole output (B x out x 4 B)",
            lambda ctx, session: forward_buffers(layer, ctx, "gather"),
            {"check": "exact: equals the unsplit x @ W.T on rank 0"},
        ),
        "mp_train_step": (
            y_bytes,
            "all_gather",
            "the whole output (B x out x 4 B) all-gathered per step",
            lambda ctx, session: mp_train_buffers(layer, ctx),
            _train_fields(layer, n, "mp", 0),
        ),
        "dp_train_step": (
            w_bytes,
            "all_reduce",
            "the whole weight gradient (out x in x 4 B) all-reduced per step",
            lambda ctx, session: dp_train_buffers(layer, ctx),
            _train_fields(layer, n, "dp", w_bytes),
        ),
    }
    return {op: spec[op] for op in OPS}


test_model_parallel = experiment_test(model_parallel_cases)
