"""Exact correctness checks.

Inputs are small integers chosen per (rank, element index) so that every
reduction is exact in every dtype, as nccl-tests does: no rounding, no
overflow, so a check is ``==``, never a tolerance. ``n_wrong`` counts wrong
elements on every rank and sums them across ranks.

Exactness bounds: every intermediate of a sum stays below the largest integer
the dtype represents exactly (bfloat16 256, float16 2048, float32 2^24); a
product only multiplies values in {1, -1, 2} with at most one 2 per element; an
average sums multiples of the world size so the division is exact.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

DTYPE_OF = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
}

# Largest M such that every integer in [-M, M] is exact in the dtype.
_EXACT = {
    torch.float16: 2048,
    torch.bfloat16: 256,
    torch.float32: 1 << 24,
    torch.float64: 1 << 53,
    torch.int32: (1 << 31) - 1,
    torch.int64: (1 << 63) - 1,
}


def exact_limit(dtype: torch.dtype) -> int:
    return _EXACT[dtype]


def value_range(redop: str, world_size: int, dtype: torch.dtype) -> int:
    """Values are drawn from 1..hi; hi keeps the reduction exact (at least 1)."""
    m = exact_limit(dtype)
    if redop == "avg":
        return max(1, min(8, m // (world_size * world_size)))
    if redop in ("sum",):
        return max(1, min(8, m // world_size))
    return 8


def pattern(
    rank: int,
    numel: int,
    dtype: torch.dtype,
    *,
    redop: str = "sum",
    world_size: int = 1,
    offset: int = 0,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """The value rank ``rank`` contributes at element indices offset..offset+numel-1."""
    idx = torch.arange(offset, offset + numel, dtype=torch.int64, device=device)
    if redop == "product":
        # At most one rank holds 2 at each index; signs vary. Product is exact.
        v = torch.ones_like(idx)
        v = torch.where((idx + rank) % 3 == 1, -v, v)
        v = torch.where((idx + rank) % (world_size + 1) == 0, 2 * v, v)
        return v.to(dtype)
    hi = value_range(redop, world_size, dtype)
    v = (idx + 3 * rank) % hi + 1
    if redop == "avg":
        v = v * world_size
    return v.to(dtype)


def reduce_expected(
    redop: str, world_size: int, numel: int, dtype: torch.dtype, *, offset: int = 0, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """The exact result of reducing every rank's pattern with ``redop``."""
    acc = None
    for r in range(world_size):
        v = pattern(r, numel, dtype, redop=redop, world_size=world_size, offset=offset, device=device)
        v = v.to(torch.float64) if dtype.is_floating_point else v.to(torch.int64)
        if acc is None:
            acc = v
        elif redop in ("sum", "avg"):
            acc = acc + v
        elif redop == "product":
            acc = acc * v
        elif redop == "min":
            acc = torch.minimum(acc, v)
        elif redop == "max":
            acc = torch.maximum(acc, v)
        else:
            raise ValueError(f"unknown reduce op {redop!r}")
    if redop == "avg":
        acc = acc / world_size
    return acc.to(dtype)


def count_wrong(actual: torch.Tensor, expected: torch.Tensor) -> int:
    """Number of elements of ``actual`` that differ from ``expected`` (shape mismatch: all)."""
    if actual.shape != expected.shape:
        return max(actual.numel(), expected.numel())
    a, e = actual.detach(), expected.to(actual.device)
    # NaN never equals anything, which is what we want: a NaN is wrong.
    return int((a != e).sum().item())


def count_wrong_any(actual: torch.Tensor, *expected: torch.Tensor) -> int:
    """Elements of ``actual`` that differ from any of ``expected`` (each counted once)."""
    if any(actual.shape != e.shape for e in expected):
        return max([actual.numel()] + [e.numel() for e in expected])
    a = actual.detach()
    bad = torch.zeros(a.shape, dtype=torch.bool, device=a.device)
    for e in expected:
        bad |= a != e.to(a.device)
    return int(bad.sum().item())


def global_wrong(local_wrong: int, group, device: torch.device) -> int:
    """Sum of wrong-element counts over every rank of ``group``."""
    return global_wrong_many([local_wrong], group, device)[0]


def global_wrong_many(local_wrong: list[int], group, device: torch.device) -> list[int]:
    """Element-wise sums of several wrong-element counts over every rank (one all_reduce)."""
    t = torch.tensor(local_wrong, dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
    return [int(v) for v in t.tolist()]
