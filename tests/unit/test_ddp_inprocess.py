"""DDP cases through the harness in this process, on a one-rank Gloo group: the records' byte model,
DDP's bucket count per cap, and the reference check (multi-rank checks: tests/dist/test_ddp_dist.py)."""

from __future__ import annotations

import pytest

from experiments.ddp import cases as ddp_exp
from suite.common.config import build_config
from suite.harness.runner import Harness
from tests.helpers.inprocess import DDP_CFG, lone_group

BUCKETS_CFG = build_config(iters=1, warmup_iters=1, heartbeat_timeout_s=0, ddp={"params": 1_000_000})
"""1M parameters: five Linear layers of 0.4M, 3 x 0.19M and 4K parameters, so 1/8 and 1/2 of the gradient
cut it into different buckets (DDP closes a bucket once it reaches the cap)."""


@pytest.fixture(scope="module")
def ctx():
    with lone_group(DDP_CFG) as c:
        yield c


def _records(ctx, *labels, cfg=DDP_CFG) -> dict[str, dict]:
    """The records of the MLP cases ``labels``, run in this order by one harness (one session)."""
    harness = Harness(ctx, cfg, env={})
    cases = {c.record_label: c for c in ddp_exp.ddp_cases(cfg, 1) if c.identity["model"] == "mlp"}
    return {label: harness.run(cases[label])[1] for label in labels}


def test_accumulation_without_no_sync_counts_every_all_reduce(ctx):
    recs = _records(ctx, "accum x2 sync each", "accum x2 no_sync")
    each, once = recs["accum x2 sync each"], recs["accum x2 no_sync"]
    grad = 4 * each["n_params"]  # float32 gradient of every parameter
    assert (each["size_bytes"], each["count"]) == (2 * grad, 2 * grad // 4)
    assert once["size_bytes"] == grad
    assert (each["allreduces_per_step"], once["allreduces_per_step"], each["grad_bytes"]) == (2, 1, grad)
    # busbw = size / t x 2(n-1)/n: the bytes of both all_reduces over the one step's time
    assert each["algbw_gbps"] == pytest.approx(2 * grad / (each["time_us"] * 1e-6) / 1e9, rel=1e-6)
    for r in recs.values():
        assert r["checked"] and r["n_wrong"] == 0 and r["check_rule"] == "exact" and r["check_max_abs_diff"] == 0
        # the MLP's BatchNorm buffers are compared too (one rank: its own, broadcast from itself)
        assert r["check_buffers"].startswith("exact (rank 0's") and r["check_buffer_max_abs_diff"] == 0
        assert "check_buffers" in r["check"] and "check_buffer_max_abs_diff" in r["provenance"]


def test_bucket_caps_relative_to_the_gradient_change_the_buckets_ddp_builds(ctx):
    labels = [f"ddp bucket_cap={f:g}x grad" for f in (0.125, 0.5, 1, 2)]
    recs = _records(ctx, *labels, cfg=BUCKETS_CFG)
    counts = [recs[label]["n_buckets"] for label in labels]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[1] > counts[-1] >= 1, counts
    for label in labels:
        r = recs[label]
        assert sum(r["bucket_sizes"]) == r["grad_bytes"] and len(r["bucket_sizes"]) == r["n_buckets"]
        assert r["bucket_cap_bytes"] == int(r["bucket_fraction"] * r["grad_bytes"])


def test_logger_statistics_cover_the_timed_steps_only_and_the_no_op_hook_is_not_checked(ctx):
    recs = _records(ctx, "ddp no-op hook (no comm)", "grad all_reduce only", "ddp")
    ddp, noop = recs["ddp"], recs["ddp no-op hook (no comm)"]
    # DDP logs a step at the next forward: the last timed step is not in it, the warm-up never is
    assert ddp["ddp_logger_steps"] == DDP_CFG.iters - 1
    # its intervals lie inside a timed step, the overlap inside the communication
    comm, ovl = ddp["ddp_logger_comm_ms"], ddp["ddp_logger_overlap_ms"]
    assert 0 < comm <= ddp["max_us"] / 1e3 and 0 <= ovl <= comm, (comm, ovl, ddp["max_us"])
    assert "warm-up" not in ddp["provenance"]["ddp_logger_comm_ms"]
    assert noop["checked"] is False and "no communication" in noop["unchecked_reason"] and noop["size_bytes"] == 0
    assert ddp["noop_step_ms"] == pytest.approx(noop["time_us"] / 1e3)
    assert ddp["allreduce_ms"] == pytest.approx(recs["grad all_reduce only"]["time_us"] / 1e3)
    assert ddp["overlap_saved_ms"] == pytest.approx(ddp["noop_step_ms"] + ddp["allreduce_ms"] - ddp["time_us"] / 1e3)
    assert ddp["provenance"]["overlap_saved_ms"] == "derived: noop_step_ms + allreduce_ms - time_us"
    assert "overlap_saved_ms" not in noop["provenance"] and "check_tol" not in noop["provenance"]
