"""Exact correctness checks.

Inputs are integers chosen per (rank, global element index) so that every
reduction is exact in every dtype, as nccl-tests does: no rounding, no
overflow, so a check is ``==``, never a tolerance. ``n_wrong`` counts wrong
elements on every rank and sums them across ranks.

The value at (rank, index) is a 32-bit hash of both (no period in either),
reduced to 1..hi. A periodic pattern would let misrouted data pass: with
``(index + 3 rank) % 8`` every chunk of a multiple of 8 elements was the same, and
rank r's data equalled rank r+8's. ``hi`` is as large as exactness allows, from the
dtype's exact-integer bound and the world size (``value_range``): a single wrong
element escapes the check with probability about 1/hi, recorded per case as
``check_values`` (bfloat16 at many ranks leaves few values: the record says so).

What a check must see besides wrong values at the right places (each proven by the planted faults
of SUITE_INJECT_BACKEND, suite/harness/plant/backend.py; docs/metrics.md has the table):

- **a seed per check repetition** (``pattern``'s ``seed``; the builders pass ``DistContext.seed``): the
  harness gives the check run and the timed buffer sets of each case their own, so an output an
  earlier call left behind (a stale buffer) holds values of another seed and fails;
- **poison, not zero** (``output``): an output the op only writes starts as ``poison`` (NaN, or the
  integer type's minimum), a value no correct result holds, so a part never written is seen;
- **guard bands** (``output``, ``guard_damage``): each such output lies inside a larger storage
  with ``GUARD_BYTES`` of sentinels on both sides; a write past either end is named by side;
- **what is wrong, in words** (``Wrong``): a count of wrong elements carries what they are: poison
  (never written), values that belong elsewhere in the result (misplaced, duplicated or reordered
  data) or values that belong nowhere (stale data, a wrong reduction).

Exactness bounds: every intermediate of a sum stays below the largest integer
the dtype represents exactly (bfloat16 256, float16 2048, float32 2^24); a
product only multiplies values in {1, -1, 2} with at most one 2 per element; an
average sums multiples of the world size so the division is exact.
"""

from __future__ import annotations

import collections

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


_HASH_MAX = 1 << 31
"""Values never exceed 2^31 (the hash has 32 bits); int and float64 sums stay exact below it."""

_MASK32 = 0xFFFFFFFF


def value_range(redop: str, world_size: int, dtype: torch.dtype) -> int:
    """Values are drawn from 1..hi, the widest range that keeps the reduction exact (at least 1).

    sum: n values of at most hi stay exact (n * hi <= bound); avg: the inputs are multiples of
    n so n * n * hi <= bound; min/max and ``none`` (data that only moves: broadcast, gathers,
    all_to_all, p2p): any exact value; product: three values (1, -1, 2)."""
    m = min(exact_limit(dtype), _HASH_MAX)
    n = max(world_size, 1)
    if redop == "product":
        return 3
    if redop == "avg":
        return max(1, m // (n * n))
    if redop == "sum":
        return max(1, m // n)
    if redop in ("min", "max", "none"):
        return m
    raise ValueError(f"unknown reduce op {redop!r}")


def exactly_checkable(redop: str, world_size: int, dtype: torch.dtype) -> bool:
    """Whether a reduction of ``world_size`` positive integers stays exact in ``dtype`` (a bfloat16
    sum of 257 ones is not); where it does not, no exact expected result exists."""
    n = max(world_size, 1)
    if redop == "sum":
        return n <= exact_limit(dtype)
    if redop == "avg":
        return n * n <= exact_limit(dtype)
    return True


def _hash32(x: torch.Tensor) -> torch.Tensor:
    """Thomas Mueller's 32-bit integer hash (0x45d9f3b, two rounds of xorshift-multiply), on int64
    tensors holding 32 bits: the constant is below 2^28, so no product leaves int64 on any device."""
    x = x & _MASK32
    x = (((x >> 16) ^ x) * 0x45D9F3B) & _MASK32
    x = (((x >> 16) ^ x) * 0x45D9F3B) & _MASK32
    return (x >> 16) ^ x


def _mix(ranks: torch.Tensor, idx: torch.Tensor, salt: int = 0) -> torch.Tensor:
    """32 well-mixed bits of (salt, rank, index) for every rank (rows) and index (columns): no period
    in the index, none across ranks."""
    key = _hash32(ranks * 0x9E3779B1 + (salt * 0x85EBCA6B + 1))
    # Hash the index before the rank's key enters: with hash(index ^ key) rank s's data would be rank
    # r's at the index XOR-ed with key_r ^ key_s, which among many ranks is a few elements away.
    return _hash32(_hash32(idx)[None, :] ^ key[:, None])


def _values(
    ranks: torch.Tensor, idx: torch.Tensor, redop: str, world_size: int, dtype: torch.dtype, seed: int = 0
) -> torch.Tensor:
    """The int64 value of each rank (rows) at each global element index (columns), for ``seed``."""
    salt = 3 * seed  # the three streams below (values, 2's holder, the extreme's holder) per seed
    if redop == "product":
        # Signs vary per (rank, index); at most one rank (the index's hash mod n+1; n: nobody)
        # holds 2 at each index. The product is exact.
        v = torch.where(_mix(ranks, idx, salt) & 1 == 1, -1, 1)
        holder = _mix(torch.zeros(1, dtype=torch.int64, device=idx.device), idx, salt=salt + 1) % (world_size + 1)
        return torch.where(holder == ranks[:, None], 2 * v, v)
    hi = value_range(redop, world_size, dtype)
    if redop in ("min", "max") and hi >= 2:
        # One rank (the index's hash mod n) holds the extreme: the others' values lie in the other
        # half of 1..hi. Uniform values would make the min of many ranks 1 almost everywhere, and a
        # result that is the same at every index cannot show a misplaced chunk.
        half = hi // 2
        holder = _mix(torch.zeros(1, dtype=torch.int64, device=idx.device), idx, salt=salt + 2) % world_size
        lower = (holder == ranks[:, None]) == (redop == "min")
        return _mix(ranks, idx, salt) % half + 1 + torch.where(lower, 0, half)
    v = _mix(ranks, idx, salt) % hi + 1
    return v * world_size if redop == "avg" else v


_MEMO_BYTES = 64 << 20
"""Patterns and expected results kept for reuse (CPU only), at most this many bytes in all."""
_memo: collections.OrderedDict = collections.OrderedDict()
_memo_held = [0]  # bytes in _memo


def _memoised(key: tuple, device: torch.device | str, make) -> torch.Tensor:
    """``make()``, or a copy of what it returned for the same ``key`` before (CPU tensors only).

    A case builds the same inputs for its check run and again for each timed buffer set, and checks
    each against the same expected result: hashing them anew each time was a large share of a
    run. ``key`` holds every argument the values depend on; the caller gets a copy (an op that
    writes into its inputs cannot change what a later build is given). Device tensors are made
    anew (on a GPU that is cheap, and cached copies would hold device memory)."""
    if torch.device(device).type != "cpu":
        return make()
    hit = _memo.get(key)
    if hit is None:
        hit = make()
        if _nbytes(hit) <= _MEMO_BYTES:
            _memo[key] = hit
            _memo_held[0] += _nbytes(hit)
            while _memo_held[0] > _MEMO_BYTES:
                _memo_held[0] -= _nbytes(_memo.popitem(last=False)[1])
    else:
        _memo.move_to_end(key)
    return hit.clone()


def _forget() -> None:
    """Empty the memo (tests)."""
    _memo.clear()
    _memo_held[0] = 0


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def pattern(
    rank: int,
    numel: int,
    dtype: torch.dtype,
    *,
    redop: str = "sum",
    world_size: int = 1,
    offset: int = 0,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> torch.Tensor:
    """The value rank ``rank`` contributes at element indices offset..offset+numel-1, for ``seed`` (0: the
    values the suite always had; the harness gives each check repetition its own)."""
    key = ("pattern", rank, numel, dtype, redop, world_size, offset, seed)
    return _memoised(key, device, lambda: _pattern(rank, numel, dtype, redop, world_size, offset, device, seed))


def _pattern(rank, numel, dtype, redop, world_size, offset, device, seed) -> torch.Tensor:
    idx = torch.arange(offset, offset + numel, dtype=torch.int64, device=device)
    ranks = torch.tensor([rank], dtype=torch.int64, device=device)
    return _values(ranks, idx, redop, world_size, dtype, seed)[0].to(dtype)


_BLOCK_ELEMENTS = 1 << 22
"""reduce_expected builds the patterns of this many (rank, element) pairs at a time."""

_FOLD = {
    "sum": lambda block: block.sum(0),
    "avg": lambda block: block.sum(0),
    "product": lambda block: block.prod(0),
    "min": lambda block: block.amin(0),
    "max": lambda block: block.amax(0),
}
_COMBINE = {
    "sum": torch.add,
    "avg": torch.add,
    "product": torch.mul,
    "min": torch.minimum,
    "max": torch.maximum,
}


def reduce_expected(
    redop: str,
    world_size: int,
    numel: int,
    dtype: torch.dtype,
    *,
    offset: int = 0,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> torch.Tensor:
    """The exact result of reducing every rank's pattern (for ``seed``) with ``redop``."""
    if redop not in _FOLD:
        raise ValueError(f"unknown reduce op {redop!r}")
    key = ("reduce", redop, world_size, numel, dtype, offset, seed)
    return _memoised(key, device, lambda: _reduce_expected(redop, world_size, numel, dtype, offset, device, seed))


def _reduce_expected(redop, world_size, numel, dtype, offset, device, seed) -> torch.Tensor:
    idx = torch.arange(offset, offset + numel, dtype=torch.int64, device=device)
    acc = None
    step = max(1, _BLOCK_ELEMENTS // max(numel, 1))
    for first in range(0, world_size, step):  # blocks of ranks: memory stays bounded at any world size
        ranks = torch.arange(first, min(first + step, world_size), dtype=torch.int64, device=device)
        part = _FOLD[redop](_values(ranks, idx, redop, world_size, dtype, seed))
        acc = part if acc is None else _COMBINE[redop](acc, part)
    acc = acc.to(torch.float64) if dtype.is_floating_point else acc
    if redop == "avg":  # integers: the sum is a multiple of n (true division would round it in float32)
        acc = acc / world_size if dtype.is_floating_point else torch.div(acc, world_size, rounding_mode="trunc")
    return acc.to(dtype)


class Wrong(int):
    """A number of wrong elements that says what they are (``found``: one line per check that found some);
    added to another count, the lines add up too (``sum`` of a case's checks keeps them all)."""

    found: tuple[str, ...]

    def __new__(cls, n: int, found=()):
        self = super().__new__(cls, n)
        self.found = tuple(found)
        return self

    def __add__(self, other):
        return Wrong(int(self) + int(other), self.found + tuple(getattr(other, "found", ())))

    def __radd__(self, other):
        return Wrong(int(other) + int(self), tuple(getattr(other, "found", ())) + self.found)


def count_wrong(actual: torch.Tensor, expected: torch.Tensor) -> Wrong:
    """Number of elements of ``actual`` that differ from ``expected`` (shape mismatch: all), with what they are."""
    if actual.shape != expected.shape:
        n = max(actual.numel(), expected.numel())
        return Wrong(n, [f"an output of {tuple(actual.shape)} where {tuple(expected.shape)} was expected"])
    a, e = actual.detach(), expected.to(actual.device)
    # NaN never equals anything, which is what we want: a NaN is wrong.
    bad = a != e
    n = int(bad.sum().item())
    return Wrong(n, [describe(a, e, bad)] if n else [])


def count_wrong_any(actual: torch.Tensor, *expected: torch.Tensor) -> Wrong:
    """Elements of ``actual`` that differ from any of ``expected`` (each counted once), with what they are."""
    if any(actual.shape != e.shape for e in expected):
        n = max([actual.numel()] + [e.numel() for e in expected])
        return Wrong(n, [f"an output of {tuple(actual.shape)} where {tuple(expected[0].shape)} was expected"])
    a = actual.detach()
    bad = torch.zeros(a.shape, dtype=torch.bool, device=a.device)
    for e in expected:
        bad |= a != e.to(a.device)
    n = int(bad.sum().item())
    return Wrong(n, [describe(a, expected[0].to(a.device), bad)] if n else [])


# --- poison, guard bands, and what a check found ---------------------------------------------------

GUARD_BYTES = 256
"""Sentinel bytes on each side of every output made by ``output`` (a multiple of any alignment a
backend asks for, so the output itself stays as aligned as a fresh allocation)."""


def poison(dtype: torch.dtype) -> float | int:
    """A value no correct result holds: NaN, or the integer type's minimum (the patterns are positive,
    products are 1, -1 or 2 per rank, and no exact sum reaches it)."""
    return float("nan") if dtype.is_floating_point else torch.iinfo(dtype).min


def sentinel(dtype: torch.dtype) -> float | int:
    """What the guard bands hold: -inf, or the integer type's minimum + 1 (no result, and not the poison,
    so a band that received an output's poison is seen as well)."""
    return float("-inf") if dtype.is_floating_point else torch.iinfo(dtype).min + 1


def is_poison(t: torch.Tensor) -> torch.Tensor:
    return torch.isnan(t) if t.dtype.is_floating_point else t == poison(t.dtype)


def output(numel: int, dtype: torch.dtype, device: torch.device | str = "cpu", misalign: bool = False) -> torch.Tensor:
    """A 1-D output of ``numel`` elements filled with ``poison``, in the middle of a storage whose
    ``GUARD_BYTES`` on either side hold ``sentinel`` (``guard_damage`` reads them after the op).
    ``misalign``: one element more before it, so its address is off any alignment wider than its element (a
    fresh allocation's is 64 bytes or more): a backend that assumes an aligned buffer writes or reads wrong
    there. The harness asks for it in each case's check run (``DistContext.check_run``), never in the timed
    buffers, whose alignment is a fresh allocation's."""
    g = max(1, GUARD_BYTES // torch.empty((), dtype=dtype).element_size())
    before = g + 1 if misalign else g
    whole = torch.full((numel + before + g,), sentinel(dtype), dtype=dtype, device=device)
    out = whole.narrow(0, before, numel)
    out.fill_(poison(dtype))
    out.suite_guard = (whole, before)  # what guard_damage reads (views of it have none)
    return out


def guarded(t: torch.Tensor, misalign: bool = False) -> torch.Tensor:
    """A copy of ``t`` (1-D) inside guard bands: the buffer of an in-place op, its input and its output."""
    out = output(t.numel(), t.dtype, t.device, misalign)
    out.copy_(t.reshape(-1))
    return out


def guard_damage(t: torch.Tensor) -> list[tuple[str, int]]:
    """(side, elements) for each guard band of ``t`` (made by ``output``) that no longer holds the
    sentinel: ("before", k) or ("after", k); [] for a tensor without bands."""
    held = getattr(t, "suite_guard", None)
    if held is None:
        return []
    whole, before = held
    s = sentinel(whole.dtype)
    out = []
    for side, band in (("before", whole[:before]), ("after", whole[before + t.numel() :])):
        k = int((band != s).sum().item())
        if k:
            out.append((side, k))
    return out


def _num(x) -> str:
    return f"{x:z.10g}" if isinstance(x, float) else str(x)


def describe(actual: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor) -> str:
    """What the wrong elements (``bad``) of ``actual`` are, in words: poison left (never written),
    values that belong at other positions of ``expected`` (misplaced), or values that belong nowhere."""
    a, e, bad = actual.reshape(-1), expected.reshape(-1), bad.reshape(-1)
    poisoned = bad & is_poison(a)
    rest = bad & ~poisoned
    elsewhere = rest & torch.isin(a, e)
    foreign = rest & ~elsewhere
    parts = []
    for mask, what in (
        (poisoned, "poison left at {n} element(s) (never written; first at {i})"),
        (elsewhere, "{n} element(s) hold values that belong elsewhere in the result (misplaced; first at {i})"),
        (foreign, "{n} wrong value(s) (first at {i}: {got} where {want} was expected)"),
    ):
        n = int(mask.sum().item())
        if n:
            i = int(mask.nonzero()[0].item())
            parts.append(what.format(n=n, i=i, got=_num(a[i].item()), want=_num(e[i].item())))
    return "; ".join(parts)


def global_wrong(local_wrong: int, group, device: torch.device) -> int:
    """Sum of wrong-element counts over every rank of ``group``."""
    return global_wrong_many([local_wrong], group, device)[0]


def global_wrong_many(local_wrong: list[int], group, device: torch.device) -> list[int]:
    """Element-wise sums of several wrong-element counts over every rank (one all_reduce)."""
    t = torch.tensor(local_wrong, dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
    return [int(v) for v in t.tolist()]
