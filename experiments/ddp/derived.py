"""The provenance of the numbers the DDP cases derive from their measurements, and of those they measure
beside the step time: baselines, overlap, DDP's buckets and logger, the reference check. ``step_provenance``
picks a case's (no claim for a number the case does not hold); workload.py and check.py compute them."""

from __future__ import annotations

from .check import CheckRule
from .workload import LOGGER_KEYS, Variant, measured_overlap

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
    "check_tol": "modelled: the largest over elements of " + CheckRule.FORMULA + " (0 when check_rule is exact)",
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


def step_provenance(v: Variant, unchecked: str | None, buffers_compared: bool = False) -> dict:
    """The formulas of the numbers this case's records hold (no claim for an absent number)."""
    names = ["peak_mem_bytes"]
    if v.kind != "all_reduce":
        names += ["solo_step_ms", "samples_per_s", "scaling_efficiency"]
        if v.kind not in ("solo", "local"):
            names += ["local_step_ms", "comm_exposed_ms"]
    if measured_overlap(v):
        names += ["noop_step_ms", "allreduce_ms", "comm_added_ms", "overlap_saved_ms", "overlap_saved_pct"]
    if v.kind in ("ddp", "accum"):
        names += ["n_buckets", "bucket_sizes", "bucket_cap_bytes"]
    if v.kind != "all_reduce" and not unchecked:
        names += ["check_max_abs_diff", "check_tol", "check_steps"]
        if buffers_compared:
            names += ["check_buffer_max_abs_diff", "check_buffer_tol"]
    prov = {k: STEP[k] for k in names}
    if v.kind == "ddp":
        prov |= LOGGER
    return prov
