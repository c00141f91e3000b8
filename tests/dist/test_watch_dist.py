"""The online fail-slow watch (suite/watch/) through the launcher users run, at 2 Gloo ranks: a clean DDP run
flags nothing and states its cost; a model of your own (SHARDED_MODEL) whose forward sleeps on rank 1 from its
31st step on is named while the run goes on: rank 1, compute, since that step, on the terminal, in the record
and on the timeline."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time

import pytest
import torch.nn as nn

from examples import sharded_model
from suite.watch import watch
from tests.conftest import load_bench, run_suite

pytestmark = pytest.mark.slow

SLOW_FROM, SLEEP_S, BASE_S = 30, 0.1, 0.05
"""Every rank's forward sleeps BASE_S (a step of at least the watch's POINT_S: one step per point of its detector),
and rank 1's SLEEP_S more from the step after its SLOW_FROM-th on (the step indices count from 0)."""


class _Sleepy(nn.Module):
    """The example's module, slowed on rank 1 from its forward call SLOW_FROM + 1 on (the test's planted fault)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner, self.calls = inner, 0

    def forward(self, x):
        self.calls += 1
        time.sleep(BASE_S + (SLEEP_S if os.environ.get("RANK") == "1" and self.calls > SLOW_FROM else 0.0))
        return self.inner(x)


def sleepy():
    """SHARDED_MODEL factory: the example model, its forward slowed on rank 1 after SLOW_FROM steps."""
    um = sharded_model.build()
    return dataclasses.replace(um, module=_Sleepy(um.module), tp_plan=None, sp_plan=None, fsdp_units=None)


LINE = r"^# slow: rank 1 compute (\d+\.\d)x since step (\d+) \(detected \d+\.\d s after onset, p < 0\.001\)$"
"""The line rank 0 prints while the run goes on."""


def _records(tmp_path) -> list[dict]:
    return [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]


def test_a_clean_ddp_run_flags_nothing_and_states_the_watch_cost(tmp_path):
    args = ("--experiments", "ddp", "--iters", "30", "--warmup", "2", "--budget-s", "0")
    proc = run_suite(tmp_path, *args, "--", "-k", "mlp-ddp_hook_allreduce", nproc=2, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (rec,) = _records(tmp_path)
    assert rec["slowdowns"] == [] and "# slow:" not in proc.stderr + proc.stdout
    assert rec["watch_steps"] == 32 and watch.EVERY <= rec["watch_every"] <= watch.EVERY_MAX
    assert rec["watch_cost_pct"] > 0 and set(rec["watch_lateness_ms"]) == {"0", "1"}


def test_a_rank_whose_forward_turns_slow_is_named_while_the_run_goes_on(tmp_path):
    env = {"SHARDED_MODEL": "tests.dist.test_watch_dist:sleepy", "SHARDED_STRATEGIES": "ddp"}
    args = ("--experiments", "sharded", "--iters", "60", "--warmup", "2", "--budget-s", "0")
    proc = run_suite(tmp_path, *args, "--", "-k", "ddp and not replay", nproc=2, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (rec,) = [r for r in _records(tmp_path) if r["op"] != "comm_replay"]
    (flag,) = rec["slowdowns"]
    assert (flag["target"], flag["kind"], flag["ranks"], flag["metric"]) == ("rank 1", "rank", [1], "compute")
    assert SLOW_FROM - 2 <= flag["onset_step"] <= SLOW_FROM + 2 < flag["detected_step"] < rec["watch_steps"]
    assert (
        rec["watch_block"] == 1
        and flag["ratio"] > 2
        and flag["p"] < 1e-3
        and flag["detected_unix"] > flag["onset_unix"]
    )
    assert flag["detected_after_onset_s"] > 0 and "rank-sum p < 0.001" in flag["evidence"]
    # the line formats the ratio the record holds rounded to 3 decimals: 2.9497 says 2.9x, the record 2.95
    said = re.search(LINE, proc.stderr + proc.stdout, re.M)
    assert said and abs(float(said[1]) - flag["ratio"]) < 0.06 and int(said[2]) == flag["onset_step"]
    trace = json.loads((tmp_path / "results" / "run" / "trace.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    (marker,) = [e for e in events if e.get("cat") == "marker"]
    assert marker["name"] == "slow: rank 1" and marker["args"]["onset_step"] == flag["onset_step"]
