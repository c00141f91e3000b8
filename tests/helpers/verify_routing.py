"""The checks that wrong routing changes the expected outputs (collectives and p2p messages), run by the unit tier
at its world sizes and by the e2e tier at the costly ones."""

from __future__ import annotations

import math
from types import SimpleNamespace
import torch
from suite.harness import verify
from suite.ops.p2p import pattern as p2p_pattern
from suite.ops import collectives as ops


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


def _hi(n: int, dtype: str, redop: str | None) -> int:
    return verify.value_range(redop or "none", n, verify.DTYPE_OF[dtype])


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
