"""Input patterns give exact, hand-checkable expected results in every dtype."""

import pytest
import torch

from suite import verify


def test_sum_expected_by_hand():
    # rank r, index i: (i + 3r) % hi + 1 with hi = 8 for float32
    exp = verify.reduce_expected("sum", 2, 4, torch.float32)
    assert exp.tolist() == [1 + 4, 2 + 5, 3 + 6, 4 + 7]


# avg is defined for floating types only (torch rejects it for integers)
@pytest.mark.parametrize(
    "dtype,redop",
    [
        (d, r)
        for d in verify.DTYPE_OF.values()
        for r in ("sum", "avg", "product", "min", "max")
        if r != "avg" or d.is_floating_point
    ],
)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 16])
def test_expected_is_exact(dtype, redop, n):
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
    for t in inputs:
        assert torch.equal(t, t.round()) and t.abs().max() <= verify.exact_limit(dtype)
    exp = verify.reduce_expected(redop, n, numel, dtype)
    assert torch.equal(exp.to(torch.float64), ref), f"{redop} {dtype} n={n} not exact"
    assert ref.abs().max() <= verify.exact_limit(dtype)


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

    from suite.verify import count_wrong_any

    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert count_wrong_any(a, a.clone(), a.clone()) == 0
    assert count_wrong_any(a, torch.tensor([1.0, 0.0, 3.0, 4.0]), torch.tensor([1.0, 0.0, 0.0, 4.0])) == 2
    assert count_wrong_any(a, torch.zeros(3)) == 4
