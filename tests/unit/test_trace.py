"""The journal on a one-rank Gloo group in this process: every op form the harness's cases call is journaled."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from suite.harness import journal, journal_wrap
from suite.harness.runner import Harness
from suite.launch.config import BenchConfig
from suite.ops import sweep
from suite.ops.collectives import FUNCTION_OF
from tests.unit.test_harness_inprocess import lone_group

CFG = BenchConfig(iters=3, warmup_iters=1, min_bytes=64, max_bytes=64, heartbeat_timeout_s=0)


@pytest.fixture(scope="module")
def ctx():
    with lone_group(CFG) as c:
        yield c


def _journal_every_op(monkeypatch, j) -> None:
    """``j`` on every torch.distributed op, as journal.install leaves them (undone after the test)."""
    for op in journal_wrap.OPS:
        if hasattr(dist, op):
            monkeypatch.setattr(dist, op, journal_wrap.wrap(j, op, getattr(dist, op)))


@pytest.mark.parametrize("variant", ["all_gather_into_tensor", "reduce_scatter_tensor"])
def test_the_journal_sees_the_tensor_forms_the_collectives_call(ctx, monkeypatch, variant):
    # torch 2.13's all_gather_single / reduce_scatter_single, called by the harness's cases: journaled like the
    # others (the hang diagnosis and the trace see them), also though the journal is installed after import
    j = journal.Journal(0, None)
    _journal_every_op(monkeypatch, j)
    case = next(c for c in sweep.collective_cases(CFG, 1, experiment="collectives") if c.identity["variant"] == variant)
    j.set_case(case.label)
    Harness(ctx, CFG, env={}).run(case)
    # the check run, the warm-up and the timed samples: 1 + 1 + 3 calls
    assert j.case_ops.get(FUNCTION_OF[variant], 0) >= 5, j.case_ops
