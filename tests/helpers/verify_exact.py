"""The exactness check of the expected results (suite.harness.verify), run by the unit tier at its world sizes and
by the e2e tier at the costly ones."""

from __future__ import annotations

import pytest
import torch
from suite.harness import verify


UNIT_WORLDS = (1, 2, 3, 9, 17)


SCALE_WORLDS = (257, 1024)
"""World sizes of the unit tier; tests/e2e/test_verify_routing_scale.py runs 257 and 1024 (1024 patterns
a case: tens of seconds in all)."""


def exact_combos(worlds=UNIT_WORLDS):
    """(dtype, redop, n) where an exact reduction of n positive values exists (integer avg too: NCCL and MPI
    run it, and its inputs are multiples of n); the others are exactly_checkable() == False
    (tests/unit/test_verify.py)."""
    for d in verify.DTYPE_OF.values():
        for r in ("sum", "avg", "product", "min", "max"):
            for n in worlds:
                if verify.exactly_checkable(r, n, d):
                    yield d, r, n


def check_expected_is_exact(dtype, redop, n):
    """reduce_expected equals the float64 reduction of every rank's own pattern, and every value (input
    and result) is an integer the dtype holds exactly."""
    if redop in ("sum", "avg") and (n if redop == "sum" else n * n) > verify.exact_limit(dtype):
        pytest.skip(f"no exact {redop} of {n} positive values in {dtype}: the suite cannot check it either")
    numel = 97
    inputs = [verify.pattern(r, numel, dtype, redop=redop, world_size=n).to(torch.float64) for r in range(n)]
    stacked = torch.stack(inputs)
    ref = {
        "sum": stacked.sum(0),
        "avg": stacked.mean(0),
        "product": stacked.prod(0),
        "min": stacked.min(0).values,
        "max": stacked.max(0).values,
    }[redop]
    # inputs themselves are integers exactly representable in the dtype
    assert torch.equal(stacked, stacked.round()) and stacked.abs().max() <= verify.exact_limit(dtype)
    exp = verify.reduce_expected(redop, n, numel, dtype)
    assert torch.equal(exp.to(torch.float64), ref), f"{redop} {dtype} n={n} not exact"
    assert ref.abs().max() <= verify.exact_limit(dtype)
