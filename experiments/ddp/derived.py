"""The numbers the DDP cases derive from their timed steps (``timed_fields``: the baselines they are compared
with, overlap, DDP's buckets and logger, what the reference check found) and the provenance of each, and of
those they measure beside the step time. ``step_provenance`` picks a case's (no claim for a number the case does
not hold); check.py computes the check's figures."""

from __future__ import annotations

import statistics
from typing import NamedTuple

from torch.nn.parallel import DistributedDataParallel as DDP

from suite.api import DistContext, Session, dist_max, dist_min

from . import check, internals, kinds
from .workload import EXPERIMENT, NOOP, DdpSettings, Step, Variant, peak_fields, prepare

LOGGER_KEYS = {
    "ddp_logger_forward_ms": "forward_compute_time",
    "ddp_logger_backward_compute_ms": "backward_compute_time",
    "ddp_logger_comm_ms": "backward_comm_time",
    "ddp_logger_overlap_ms": "backward_compute_comm_overlap_time",
}


def measured_overlap(v: Variant) -> bool:
    """DDP cases whose communication is the float32 all_reduce of the gradient (the baseline's bytes)."""
    return v.kind.ddp_step and v.hook in (None, "allreduce")


STEP = {
    "solo_step_ms": "measured: the solo case's own timed median (or one blocking baseline run if it did not run)",
    "local_step_ms": "measured: the no-communication case's own timed median (or one blocking baseline run)",
    "samples_per_s": "derived: samples_per_step / time_us",
    "scaling_efficiency": "derived: micro_batches x solo_step_ms / time_us",
    "comm_exposed_ms": "derived: time_us - micro_batches x local_step_ms",
    "peak_mem_bytes": "measured: suite.harness.profiling.PeakMemory around warm-up and the timed steps, max over ranks",
    "noop_step_ms": "measured: the no-op-hook DDP case's own timed median (or one blocking baseline run)",
    "allreduce_ms": "measured: the gradient all_reduce case's own timed median (or one blocking baseline run)",
    "comm_added_ms": "derived: time_us - noop_step_ms",
    "overlap_saved_ms": "derived: noop_step_ms + allreduce_ms - time_us",
    "overlap_saved_pct": "derived: 100 x overlap_saved_ms / allreduce_ms",
    "n_buckets": "measured: buckets of the timed module's reducer after the timed steps",
    "bucket_sizes": "measured: bytes of each bucket of the timed module's reducer after the timed steps "
    "(its gradient buffers, rank 0's; every rank builds the same buckets)",
    "bucket_cap_bytes": "measured: the bucket cap DDP's logger reports for the timed module "
    "(_get_ddp_logging_data: what bucket_cap_mb became)",
    "check_steps": "measured: optimizer steps the checked module had taken when it was compared with the "
    "single-process reference (warm-up and timed steps)",
    "check_max_abs_diff": "measured: max over ranks and parameters of |param - reference param| after the timed steps",
    "check_tol": "modelled: the largest over elements of " + check.FORMULA + " (0 when check_rule is exact)",
    "check_buffer_max_abs_diff": "measured: max over ranks and buffer elements of |buffer - the reference's "
    "buffer for that rank| after the timed steps (BatchNorm running stats and count; check_buffers)",
    "check_buffer_tol": "modelled: the largest over ranks and buffer elements of the running stats' bound "
    "(experiments/ddp/buffer_bound.py, from the parameters' tol of every step: 0 when check_rule is exact)",
}


LOGGER = {
    k: f"measured: DDP logger {src} (_get_ddp_logging_data, every iteration), median over the timed "
    "steps but the last, max over ranks"
    for k, src in LOGGER_KEYS.items()
}


LOGGER["ddp_logger_overlap_pct"] = "derived: 100 x ddp_logger_overlap_ms / ddp_logger_comm_ms"


LOGGER["ddp_logger_steps"] = (
    "measured: timed steps DDP's logger reported on every rank (the fewest over ranks; a step is logged at "
    "the next forward, so the last timed step is not among them)"
)


def step_provenance(v: Variant, unchecked: str | None, buffers_compared: bool = False, baselines: bool = True) -> dict:
    """The formulas of the numbers this case's records hold (no claim for an absent number); ``baselines``
    False: none of those derived from the baseline steps (DDP_TIMED_ONLY=1)."""
    names = ["peak_mem_bytes"]
    if v.kind.trains and baselines:
        names += ["solo_step_ms", "samples_per_s", "scaling_efficiency"]
        if v.kind.communicates:
            names += ["local_step_ms", "comm_exposed_ms"]
    if measured_overlap(v) and baselines:
        names += ["noop_step_ms", "allreduce_ms", "comm_added_ms", "overlap_saved_ms", "overlap_saved_pct"]
    if v.kind.ddp_wrapped:
        names += ["n_buckets", "bucket_sizes", "bucket_cap_bytes"]
    if v.kind.trains and not unchecked:
        names += ["check_max_abs_diff", "check_tol", "check_steps"]
        if buffers_compared:
            names += ["check_buffer_max_abs_diff", "check_buffer_tol"]
    prov = {k: STEP[k] for k in names}
    if v.kind.ddp_step:
        prov |= LOGGER
    return prov


# --- the numbers derived from the timed steps, and the baselines they are compared with ------------


def _baseline_s(session: Session, ctx: DistContext, settings: DdpSettings, v: Variant) -> float:
    """Median of a baseline step of ``v.model`` (solo, no communication, no-op hook, all_reduce alone): that
    case's own timed run when it ran before (the usual order), else one blocking baseline run by the harness,
    shared by the run."""

    def make_call():
        step = prepare(v, ctx, settings)
        return lambda a: step.run()

    return session.baseline(_baseline_key(ctx, v), ctx, make_call).median_s


def _baseline_key(ctx: DistContext, v: Variant) -> tuple:
    return EXPERIMENT, id(ctx.group), v.model, v.kind.name, v.hook


class _Baselines(NamedTuple):
    """The baseline steps of one model a case is compared with."""

    solo: Variant
    local: Variant
    all_reduce: Variant
    noop: Variant


def _baselines(model: str) -> _Baselines:
    return _Baselines(
        solo=Variant(model=model, kind=kinds.SOLO, label="solo"),
        local=Variant(model=model, kind=kinds.LOCAL, label="local"),
        all_reduce=Variant(model=model, kind=kinds.ALL_REDUCE, label="all_reduce"),
        noop=Variant(model=model, kind=kinds.DDP, label="noop", hook=NOOP),
    )


def _is_baseline(v: Variant) -> bool:
    return v.kind.baseline or v.hook == NOOP


def _bucket_fields(ddp: DDP) -> dict:
    """The buckets DDP's reducer holds now (after the timed steps: DDP rebuilds them in gradient-ready
    order at the start of its second iteration)."""
    sizes = internals.bucket_sizes(ddp)
    return {
        "n_buckets": None if sizes is None else len(sizes),
        "bucket_sizes": sizes,
        "bucket_cap_bytes": internals.logging_data(ddp).get("bucket_cap_bytes"),
    }


def _logger_fields(ctx: DistContext, step: Step, readings: list[dict], timed_steps: int) -> dict:
    """DDP's interval statistics of the timed steps only: the logger's per-iteration values (iteration k
    logged = step k-1), median over the timed steps this rank logged, max over ranks."""
    first_timed = step.steps - timed_steps
    by_step = {int(d["iteration"]) - 1: d for d in readings if "backward_comm_time" in d}
    timed = [d for k, d in sorted(by_step.items()) if k >= first_timed]
    n = int(dist_min(ctx, [len(timed)])[0])  # the fewest any rank has (same everywhere)
    if n == 0:
        return {"ddp_logger_steps": 0}
    values = [statistics.median(float(d[k]) for d in timed[:n]) / 1e6 for k in LOGGER_KEYS.values()]  # ns -> ms
    out = dict(zip(LOGGER_KEYS, dist_max(ctx, values)))
    comm, ovl = out["ddp_logger_comm_ms"], out["ddp_logger_overlap_ms"]
    out["ddp_logger_overlap_pct"] = 100.0 * ovl / comm if comm > 0 else None
    out["ddp_logger_steps"] = n
    return out


def timed_fields(
    v: Variant,
    settings: DdpSettings,
    step: Step,
    ctx: DistContext,
    m,
    around,
    session: Session,
    logger: list,
    seen: dict,
) -> dict:
    """Fields derived from this case's own timed median ``t`` (the formulas are in the provenance); under
    DDP_TIMED_ONLY=1 none of those that need a baseline step."""
    t, n, bsz = m.median_s, ctx.world_size, settings.batch_per_rank
    if _is_baseline(v):
        session.keep_baseline(_baseline_key(ctx, v), m)
    base, baselines = _baselines(v.model), not settings.timed_only
    fields: dict = {}
    if v.kind.trains and baselines:
        k = step.samples_per_step // bsz
        ranks_stepping = v.kind.steps_ranks or n
        solo = _baseline_s(session, ctx, settings, base.solo)
        fields |= {
            "solo_step_ms": solo * 1e3,
            "micro_batches": k,
            "samples_per_step": step.samples_per_step * ranks_stepping,
            "samples_per_s": step.samples_per_step * ranks_stepping / t,
            "scaling_efficiency": k * solo / t,
        }
        if v.kind.communicates:
            local = _baseline_s(session, ctx, settings, base.local)
            fields |= {"local_step_ms": local * 1e3, "comm_exposed_ms": (t - k * local) * 1e3}
    if measured_overlap(v) and baselines:
        noop = _baseline_s(session, ctx, settings, base.noop)
        ar = _baseline_s(session, ctx, settings, base.all_reduce)
        fields |= {
            "noop_step_ms": noop * 1e3,
            "allreduce_ms": ar * 1e3,
            "comm_added_ms": (t - noop) * 1e3,
            "overlap_saved_ms": (noop + ar - t) * 1e3,
            "overlap_saved_pct": 100.0 * (noop + ar - t) / ar,
        }
    if step.ddp is not None:
        fields |= _bucket_fields(step.ddp)
        if v.kind.ddp_step:
            readings = logger + [internals.logging_data(step.ddp)]
            fields |= _logger_fields(ctx, step, readings, m.iterations)
    if seen:
        worst = dist_max(ctx, [seen["max_abs_diff"]])[0]
        fields |= {
            "check_rule": seen["rule"],
            "check_tol": seen["tol"],
            "check_steps": seen["steps"],
            "check_max_abs_diff": worst,
        }
        if "buffer_max_abs_diff" in seen:
            fields["check_buffer_max_abs_diff"] = dist_max(ctx, [seen["buffer_max_abs_diff"]])[0]
            fields["check_buffer_tol"] = dist_max(ctx, [seen["buffer_tol"]])[0]
    fields |= peak_fields(ctx, around)
    return fields
