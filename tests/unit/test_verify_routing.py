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

import math
from types import SimpleNamespace

import pytest
import torch

from suite.harness import verify
from suite.ops.p2p import pattern as p2p_pattern
from suite.ops import collectives as ops
from suite.ops import sweep

WORLDS = (2, 3, 4, 5, 8, 9, 16, 17, 33, 64)
"""World sizes of the unit tier; tests/e2e/test_verify_routing_scale.py runs 129, 256, 257 and 1024 (the
same check, tens of seconds)."""
SCALE_WORLDS = (129, 256, 257, 1024)
REDUCING = ("all_reduce", "reduce", "reduce_scatter")
MOVING = ("broadcast", "all_gather", "gather", "scatter", "all_to_all")


def _ctx(rank: int, n: int):
    return SimpleNamespace(rank=rank, world_size=n, device=torch.device("cpu"), seed=0)


def _chunk(hi: int, n: int, rows: int) -> int:
    """Elements a chunk at which a chance match of any two of ``rows`` chunks is below 2^-40 (and at
    least 8 at up to 8 ranks, where the old patterns repeated every 8 elements)."""
    return max(8 if n <= 8 else 1, math.ceil((40 + 2 * math.log2(rows)) / math.log2(hi)))


def _args(dtype: str, redop: str | None, count: int) -> ops.Args:
    return ops.Args(variant="x", dtype=dtype, redop=redop, size_bytes=0, count=count, in_place=False, root=0)


def _distinct_rows(rows: torch.Tensor) -> bool:
    """Whether no two rows are equal: equal rows have equal fingerprints, so distinct fingerprints
    settle it; only rows whose fingerprints collide are compared in full."""
    rows = rows.to(torch.float64)
    fingerprint = rows @ torch.rand(rows.shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    order = torch.argsort(fingerprint)
    same = (fingerprint[order][1:] == fingerprint[order][:-1]).nonzero().flatten()
    return all(not torch.equal(rows[order[i]], rows[order[i + 1]]) for i in same.tolist())


def _combos():
    for n in WORLDS + SCALE_WORLDS:
        for dtype in verify.DTYPE_OF:
            for op in REDUCING + MOVING:
                for redop in ("sum", "avg", "product", "min", "max") if op in REDUCING else (None,):
                    if redop == "avg" and not verify.DTYPE_OF[dtype].is_floating_point:
                        continue  # torch defines AVG for floating types only
                    if redop and not verify.exactly_checkable(redop, n, verify.DTYPE_OF[dtype]):
                        continue  # no exact answer exists (test_verify.test_exactly_checkable_bounds)
                    yield n, dtype, op, redop


COMBOS = list(_combos())  # every world size of both tiers


def _grid(n: int, a: ops.Args, numel: int) -> torch.Tensor:
    """[rank, element]: every rank's pattern over elements 0..numel-1 (one vectorised call)."""
    dt = verify.DTYPE_OF[a.dtype]
    idx = torch.arange(numel, dtype=torch.int64)
    return verify._values(torch.arange(n), idx, a.redop or "none", n, dt).to(dt)


def _expected_chunks(op: str, n: int, a: ops.Args, c: int) -> torch.Tensor:
    """[rank, chunk, element]: every rank's expected output as n chunks of c (one chunk for scatter
    and reduce_scatter). Vectorised; test_expected_chunks_are_the_suites checks it against the
    suite's own per-rank expected values (suite/ops/collectives.py) at small world sizes."""
    if op in REDUCING:
        whole = verify.reduce_expected(a.redop, n, n * c, verify.DTYPE_OF[a.dtype])
        return whole.view(n, 1, c) if op == "reduce_scatter" else whole.view(1, n, c).expand(n, n, c)
    g = _grid(n, a, n * c)
    if op == "broadcast":
        return g[0].view(1, n, c).expand(n, n, c)
    if op in ("all_gather", "gather"):
        return g[:, :c].reshape(1, n, c).expand(n, n, c)
    if op == "scatter":
        return g[:, :c].reshape(n, 1, c)
    if op == "all_to_all":  # chunk j of rank r is what rank j addressed to r: its elements r*c..
        return g.view(n, n, c).transpose(0, 1)
    raise AssertionError(op)


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


def _hi(n: int, dtype: str, redop: str | None) -> int:
    return verify.value_range(redop or "none", n, verify.DTYPE_OF[dtype])


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


def check_routing(n: int) -> None:
    """Every op, dtype and reduce op at ``n`` ranks: wrong routing changes the expected output."""
    seen = set()
    for dtype in verify.DTYPE_OF:
        for redop in (None, "sum", "avg", "product", "min", "max"):
            todo = [op for m, d, op, r in COMBOS if (m, d, r) == (n, dtype, redop)]
            hi = _hi(n, dtype, redop)
            if not todo or hi < 2 or (redop, hi) in seen:
                continue  # dtypes with the same value range hold the same integers (float64, int32, int64)
            seen.add((redop, hi))
            c = _chunk(hi, n, n * n if redop is None else n)
            a = _args(dtype, redop, n * c)
            if redop:  # one reduction serves all_reduce, reduce and reduce_scatter
                whole = verify.reduce_expected(redop, n, n * c, verify.DTYPE_OF[dtype]).view(n, c)
                # every chunk of the result differs: a chunk shifted, permuted, duplicated or
                # delivered to the wrong rank (reduce_scatter) changes what a rank holds
                assert _distinct_rows(whole), f"{redop} {dtype} at {n} ranks: two result chunks are equal"
                if redop in ("sum", "avg", "product"):
                    # rank s's contribution replaced by rank r's (a ring step that sends the wrong
                    # peer's data) changes the result: every rank contributes a different chunk
                    assert _distinct_rows(_grid(n, a, c)), f"{redop} {dtype} at {n}: equal contributions"
                continue
            for op in todo:
                out = _expected_chunks(op, n, a, c)  # [rank, chunk, element]
                what = f"{op} {dtype} at {n} ranks, {c} elements a chunk"
                if op in ("all_gather", "gather", "broadcast", "all_to_all"):
                    assert _distinct_rows(out[0]), f"{what}: two chunks of one output are equal"
                if op in ("scatter", "all_to_all"):
                    assert _distinct_rows(out.reshape(-1, c)), f"{what}: two ranks expect the same chunk"


@pytest.mark.parametrize("n", (2, 3, 9))
@pytest.mark.parametrize("dtype", sorted(verify.DTYPE_OF))
def test_p2p_messages_differ(n, dtype):
    check_p2p_messages(n, dtype)  # 1024 ranks: tests/e2e/test_verify_routing_scale.py


def check_p2p_messages(n: int, dtype: str) -> None:
    """Window, batching and barrier-cost messages (message j at offset j*count) and the messages of
    different senders all differ: a dropped, duplicated or reordered message is seen."""
    dt = verify.DTYPE_OF[dtype]
    window = 16
    count = _chunk(verify.value_range("none", n, dt), n, min(n, 64) * window)
    senders = range(min(n, 64))
    msgs = torch.stack(
        [p2p_pattern.pat(_ctx(0, n), s, count, dt, offset=j * count) for s in senders for j in range(window)]
    )
    assert _distinct_rows(msgs)


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
