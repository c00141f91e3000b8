"""The numbers the model_parallel cases add to a measurement, each with its provenance: the pipeline's
c, tau, model time and bubbles, and the train steps' samples per second."""

from __future__ import annotations

import dataclasses

from suite.api import Buffers, DistContext, Session

from .model import pipeline_bubble, pipeline_time_s
from .settings import ModelParallelSettings
from .workload import (
    compute_buffers,
    relay_buffers,
    stage_repeats,
)


def stage_keys(pipe: ModelParallelSettings, ctx: DistContext) -> tuple:
    shape = (id(ctx.group), pipe.microbatch_rows, pipe.stage_features)
    return tuple((__name__, what, *shape) for what in ("compute", "hop", "relay", "computes"))


def _stage_times_s(pipe: ModelParallelSettings, ctx: DistContext, session: Session) -> tuple[float, float]:
    """(c, τ) of this run: the pipeline_compute / pipeline_transfer cases' own medians when they ran
    before (the declared order), else one blocking run of the same calls by the harness's timing loop."""
    kc, khop, krelay, kcomputes = stage_keys(pipe, ctx)
    k = stage_repeats(ctx.world_size)
    c = session.once(
        kc, lambda: session.baseline(kcomputes, ctx, lambda: compute_buffers(pipe, ctx, k).call).scaled(k)
    ).median_s
    hop = session.once(
        khop,
        lambda: session.baseline(krelay, ctx, lambda: relay_buffers(pipe, ctx, k).call).scaled(
            k * (ctx.world_size - 1)
        ),
    )
    return c, hop.median_s


def pipeline_fields(
    pipe: ModelParallelSettings, ctx: DistContext, m: int, schedule: str, meas, session: Session
) -> dict:
    c, tau = _stage_times_s(pipe, ctx, session)
    n, t = ctx.world_size, meas.median_s
    model = pipeline_time_s(schedule, n, m, c, tau)
    return {
        "stage_compute_us": c * 1e6,
        "transfer_us": tau * 1e6,
        "model_time_us": model * 1e6,
        "time_over_model": t / model if model > 0 else None,
        "model_holds": model > 0 and abs(t / model - 1) <= MODEL_HOLDS_WITHIN,
        "bubble": pipeline_bubble(m, c, t),
        "model_bubble": pipeline_bubble(m, c, model),
        "ideal_bubble": pipeline_bubble(m, c, pipeline_time_s(schedule, n, m, c, 0.0)),
    }


MODEL_HOLDS_WITHIN = 0.25
"""A schedule's model holds for a run when the measured T is within ±25% of it (``model_holds``); beyond,
the model does not describe what ran (cores shared by more stages than the model assumes, a transfer
that needs the CPU it computes on) and its bubble is not the run's."""


PIPELINE_PROVENANCE = {
    "stage_compute_us": "measured: median of pipeline_compute in this run (a sample: one stage's layer on one "
    "micro-batch, stage_repeats times back to back, every rank at once, divided by stage_repeats; the harness's "
    "blocking loop on the same call if that case did not run)",
    "transfer_us": "measured: median of pipeline_transfer in this run (a sample: one micro-batch relayed through "
    "the stages with blocking send/recv, stage_repeats times back to back, divided by stage_repeats x (S-1) hops)",
    "model_time_us": "modelled: the schedule's `model` at c = stage_compute_us, tau = transfer_us",
    "time_over_model": "derived: time_us / model_time_us",
    "model_holds": "derived: |time_over_model - 1| <= MODEL_HOLDS_WITHIN (0.25)",
    "bubble": "derived: 1 - M * stage_compute_us / time_us",
    "model_bubble": "modelled: 1 - M * stage_compute_us / model_time_us",
    "ideal_bubble": "modelled: 1 - M*c / T with tau = 0 (compute-only GPipe) = (S-1)/(M+S-1)",
}


def with_samples_per_s(build, layer: ModelParallelSettings):
    """The train steps' buffers, plus samples_per_s derived from the timed median."""

    def with_rate(ctx: DistContext, session) -> Buffers:
        return dataclasses.replace(
            build(ctx, session), derive=lambda m, around, session: {"samples_per_s": layer.batch / m.median_s}
        )

    return with_rate


TRAIN_PROVENANCE = {
    "samples_per_s": "derived: global_batch / time_us",
    "check_max_tolerance": "modelled: largest per-element float32 forward error bound of the step "
    "(train_check_rule; 0 where the step is exact)",
}
