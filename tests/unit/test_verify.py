"""Input patterns give exact, hand-checkable expected results in every dtype."""

import pytest
import torch

from suite.harness import verify
from tests.helpers.verify_exact import check_expected_is_exact, exact_combos


def _hash32(x: int) -> int:
    """Thomas Mueller's integer hash in plain Python integers (the reference for suite.harness.verify's)."""
    x &= 0xFFFFFFFF
    x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFF
    x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFF
    return (x >> 16) ^ x


def test_pattern_by_hand():
    # value(rank, i) = hash32(hash32(i) ^ hash32(key(rank))) % hi + 1, hi = 2^24 // n for a
    # float32 sum; the int64 tensor arithmetic must equal 32-bit unsigned arithmetic exactly
    n, hi = 3, (1 << 24) // 3
    for rank in range(n):
        key = _hash32(rank * 0x9E3779B1 + 1)
        want = [_hash32(_hash32(i) ^ key) % hi + 1 for i in range(1000, 1064)]
        got = verify.pattern(rank, 64, torch.float32, world_size=n, offset=1000).tolist()
        assert got == want
    exp = verify.reduce_expected("sum", n, 4, torch.float32)
    assert exp.tolist() == [
        sum(verify.pattern(r, 4, torch.float32, world_size=n)[i].item() for r in range(n)) for i in range(4)
    ]


@pytest.mark.parametrize("redop", ["sum", "avg", "product", "min", "max"])
def test_a_shorter_pattern_is_the_start_of_a_longer_one(redop):
    """A value depends on (rank, element index) only, never on the length: the deadlock probe's pair
    (suite/ops/p2p/deadlock_child.py) builds its largest message once and sends the start of it at every
    smaller size."""
    for rank in (0, 2):
        longer = verify.pattern(rank, 4096, torch.float32, redop=redop, world_size=3, seed=5)
        for n in (1, 3, 1000):
            assert torch.equal(verify.pattern(rank, n, torch.float32, redop=redop, world_size=3, seed=5), longer[:n])


def test_value_range_is_the_exactness_bound_not_a_constant():
    assert verify.value_range("sum", 4, torch.float32) == (1 << 22)
    assert verify.value_range("avg", 4, torch.float32) == (1 << 20)
    assert verify.value_range("max", 1024, torch.float16) == 2048
    assert verify.value_range("sum", 64, torch.bfloat16) == 4
    assert verify.value_range("sum", 1024, torch.bfloat16) == 1  # the check then sees no routing: recorded


@pytest.mark.parametrize("dtype,redop,n", list(exact_combos()))
def test_expected_is_exact(dtype, redop, n):
    check_expected_is_exact(dtype, redop, n)


def test_exactly_checkable_bounds():
    assert verify.exactly_checkable("sum", 256, torch.bfloat16)
    assert not verify.exactly_checkable("sum", 257, torch.bfloat16)
    assert verify.exactly_checkable("avg", 16, torch.bfloat16)
    assert not verify.exactly_checkable("avg", 17, torch.bfloat16)
    assert verify.exactly_checkable("max", 1 << 20, torch.bfloat16)
    assert verify.exactly_checkable("sum", 1024, torch.float16)


def test_ranks_contribute_different_values():
    a = verify.pattern(0, 16, torch.float32)
    b = verify.pattern(1, 16, torch.float32)
    assert not torch.equal(a, b)


def test_count_wrong():
    e = torch.arange(10.0)
    a = e.clone()
    assert verify.count_wrong(a, e) == 0
    a[3] += 1
    a[7] = float("nan")
    assert verify.count_wrong(a, e) == 2
    assert verify.count_wrong(torch.zeros(3), torch.zeros(4)) == 4


def test_count_wrong_any_counts_an_element_once():
    import torch

    from suite.harness.verify import count_wrong_any

    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert count_wrong_any(a, a.clone(), a.clone()) == 0
    assert count_wrong_any(a, torch.tensor([1.0, 0.0, 3.0, 4.0]), torch.tensor([1.0, 0.0, 0.0, 4.0])) == 2
    assert count_wrong_any(a, torch.zeros(3)) == 4


def _fresh_pattern(rank, numel, dtype, redop, world, offset):
    return verify._pattern(rank, numel, dtype, redop, world, offset, "cpu", 0)


def _fresh_expected(redop, world, numel, dtype, offset):
    return verify._reduce_expected(redop, world, numel, dtype, offset, "cpu", 0)


# Each row differs from the first in one argument: a memo key that left it out would serve the first's tensor.
_VARIANTS = [
    # (rank, numel, dtype, redop, world, offset)
    (1, 64, torch.float32, "sum", 4, 0),
    (2, 64, torch.float32, "sum", 4, 0),  # rank
    (1, 48, torch.float32, "sum", 4, 0),  # size
    (1, 64, torch.float64, "sum", 4, 0),  # dtype (float64: another value range, not only another type)
    (1, 64, torch.float32, "max", 4, 0),  # redop
    (1, 64, torch.float32, "sum", 3, 0),  # world size
    (1, 64, torch.float32, "sum", 4, 64),  # offset
]


def test_memo_never_serves_another_arguments_pattern_or_expected():
    verify._forget()
    for rank, numel, dtype, redop, world, offset in _VARIANTS:
        got = verify.pattern(rank, numel, dtype, redop=redop, world_size=world, offset=offset)
        want = _fresh_pattern(rank, numel, dtype, redop, world, offset)
        assert got.dtype == want.dtype and torch.equal(got, want), (rank, numel, dtype, redop, world, offset)
        exp = verify.reduce_expected(redop, world, numel, dtype, offset=offset)
        assert torch.equal(exp, _fresh_expected(redop, world, numel, dtype, offset)), (redop, world, numel, dtype)
    # one entry per distinct argument set: every argument is in the key (the expected result has no rank)
    assert len(verify._memo) == len(_VARIANTS) + len({v[1:] for v in _VARIANTS})


def test_memo_hands_out_copies():
    verify._forget()
    a = verify.pattern(0, 32, torch.float32, world_size=2)
    e = verify.reduce_expected("sum", 2, 32, torch.float32)
    want_a, want_e = a.clone(), e.clone()
    a.add_(1)  # an op that writes into its inputs (all_reduce in place), a caller that edits a result
    e.zero_()
    assert torch.equal(verify.pattern(0, 32, torch.float32, world_size=2), want_a)
    assert torch.equal(verify.reduce_expected("sum", 2, 32, torch.float32), want_e)


def test_memo_is_bounded(monkeypatch):
    verify._forget()
    monkeypatch.setattr(verify, "_MEMO_BYTES", 3 * 64 * 4)  # three 64-element float32 tensors
    for offset in range(0, 5 * 64, 64):
        verify.pattern(0, 64, torch.float32, offset=offset)
    assert len(verify._memo) == 3
    assert [k[-2] for k in verify._memo] == [128, 192, 256]  # the oldest went first (keys end: offset, seed)
    verify._forget()


def test_check_still_counts_a_planted_fault_with_the_memo():
    # the check run and the timed buffer set share one memo entry; a wrong element is still counted in each
    verify._forget()
    for _ in range(2):
        out = verify.reduce_expected("sum", 4, 100, torch.float32)
        out[7] += 1
        assert verify.count_wrong(out, verify.reduce_expected("sum", 4, 100, torch.float32)) == 1
