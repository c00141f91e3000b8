"""The exact check sees misrouted data: at every world size from 2 to 1024, for every collective,
dtype and reduce op (and the p2p messages), the expected output of each rank differs from what a
wrong routing would deliver — a chunk shifted or permuted, another rank's chunk or contribution in
its place, a message dropped, duplicated or reordered.

"Differs" is shown for the suite's own expected outputs (suite/ops/collectives.py, suite/ops/p2p/) on a
chunk of ``c`` elements, the smallest c at which a chance match is below 2^-40 (at least 8: the old
patterns repeated every 8 elements). Where exactness leaves a single value (bfloat16 sums from 257
ranks), nothing can be seen and the record's ``check_values`` says 1.
"""

from __future__ import annotations


import pytest
import torch

from suite.harness import verify
from suite.ops import collectives as ops
from suite.ops import sweep
from tests.helpers.verify_routing import (
    COMBOS,
    REDUCING,
    WORLDS,
    _args,
    _ctx,
    _expected_chunks,
    _hi,
    check_p2p_messages,
    check_routing,
)


def _suites_expected(op: str, n: int, r: int, a: ops.Args, c: int) -> torch.Tensor:
    ctx = _ctx(r, n)
    return {
        "all_reduce": lambda: ops._expected_reduce(ctx, a, n * c),
        "reduce": lambda: ops._expected_reduce(ctx, a, n * c),
        "reduce_scatter": lambda: ops._expected_reduce(ctx, a, c, offset=r * c),
        "broadcast": lambda: ops._t(ctx, a, n * c, rank=0),
        "all_gather": lambda: ops._gathered(ctx, a, c),
        "gather": lambda: ops._gathered(ctx, a, c),
        "scatter": lambda: ops._t(ctx, a, c),
        "all_to_all": lambda: ops._a2a_expected(ctx, a, c),
    }[op]()


@pytest.mark.parametrize("n", (2, 3, 5))
def test_expected_chunks_are_the_suites(n):
    for _, dtype, op, redop in (x for x in COMBOS if x[0] == n):
        a = _args(dtype, redop, n * 8)
        out = _expected_chunks(op, n, a, 8)
        for r in range(n):
            assert torch.equal(out[r].reshape(-1), _suites_expected(op, n, r, a, 8)), (op, redop, dtype)


def test_every_combination_is_covered_or_recorded_as_weak():
    """Every (world, dtype, op, redop) is either routing-checked below or has one value per element,
    which the record states (check_values == 1): nothing is silently weak."""
    weak = {(n, d, r) for n, d, op, r in COMBOS if _hi(n, d, r) < 2}
    assert weak == {(n, d, r) for n, d, _, r in COMBOS if (d, r) == ("bfloat16", "sum") and n > 128} | {
        (n, d, "avg") for n, d, _, r in COMBOS if r == "avg" and n * n > verify.exact_limit(verify.DTYPE_OF[d]) // 2
    }
    assert len(COMBOS) - len(weak) > 1500


@pytest.mark.parametrize("n", WORLDS)
def test_wrong_routing_changes_the_expected_output(n):
    check_routing(n)


@pytest.mark.parametrize("n", (2, 3, 9))
@pytest.mark.parametrize("dtype", sorted(verify.DTYPE_OF))
def test_p2p_messages_differ(n, dtype):
    check_p2p_messages(n, dtype)  # 1024 ranks: tests/e2e/test_verify_routing_scale.py


@pytest.mark.parametrize("op", ("all_gather", "all_to_all", "reduce_scatter", "all_reduce", "broadcast"))
@pytest.mark.parametrize("n", (2, 3, 4))
def test_the_misroute_fault_is_seen(op, n):
    """The suite's misroute fault (SUITE_INJECT_CORRUPTION=misroute:...) applied to the expected
    outputs themselves leaves wrong elements on at least one rank."""
    from suite.harness.plant.corruptions import misroute

    a = _args("float32", "sum" if op in REDUCING else None, n * 16)
    out = _expected_chunks(op, n, a, 16)
    wrong = 0
    for r in range(n):
        chunks = [t.clone() for t in out[r]] if op != "all_reduce" else [out[r].reshape(-1).clone()]
        misroute(chunks, n)
        wrong += verify.count_wrong(torch.cat(chunks), out[r].reshape(-1))
    assert wrong > 0


def test_a_reduction_with_no_exact_answer_is_skipped_with_its_reason():
    """A bfloat16 sum over 257 ranks has no exact answer: the case says so instead of failing."""
    coll = ops.BY_VARIANT["all_reduce"]
    case = sweep.collective_case(coll, _args("bfloat16", "sum", 8), experiment="collectives")
    assert case.skip(_ctx(0, 256), None) is None
    assert "no exact sum of 257 ranks in bfloat16" in case.skip(_ctx(0, 257), None)
    mean = sweep.collective_case(coll, _args("float16", "avg", 8), experiment="collectives")
    assert mean.skip(_ctx(0, 45), None) is None and mean.skip(_ctx(0, 46), None)
