"""The statistics helpers of suite.metrics: the median's confidence interval from exact binomial
order statistics, and the normal quantile."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from suite import metrics

# (n, lower rank, upper rank) of the 95% interval [x_(k), x_(n+1-k)], 1-based, checked by hand from
# the Binomial(n, 1/2) cdf: k is the largest rank with 2·P(B <= k-1) <= 0.05. The published tables
# agree (Conover 1999, Table A3 / the classic n = 100 -> x_(40), x_(61)). For n <= 5 even the full
# range misses 95% (1 - 2/2^n): the interval is the full range.
TABLE_95 = [
    (1, 1, 1),
    (5, 1, 5),
    (6, 1, 6),  # 2·P(B<=0) = 2/64 = 0.031; 2·P(B<=1) = 14/64 = 0.22
    (8, 1, 8),  # 2·P(B<=1) = 18/256 = 0.070 > 0.05
    (9, 2, 8),  # 2·P(B<=1) = 20/512 = 0.039; 2·P(B<=2) = 92/512 = 0.18
    (10, 2, 9),
    (12, 3, 10),
    (15, 4, 12),
    (17, 5, 13),
    (20, 6, 15),
    (21, 6, 16),  # the normal approximation chose (7, 15): coverage 0.922
    (25, 8, 18),
    (30, 10, 21),
    (50, 18, 33),
    (100, 40, 61),
]


def _exact_coverage(n: int, k: int) -> Fraction:
    """P(x_(k) <= median <= x_(n+1-k)) = P(k <= B <= n-k), B ~ Binomial(n, 1/2), by direct summation."""
    return Fraction(sum(math.comb(n, i) for i in range(k, n - k + 1)), 2**n)


@pytest.mark.parametrize("n,lo,hi", TABLE_95)
def test_median_ci_ranks_match_the_hand_checked_table(n, lo, hi):
    assert metrics.median_ci_ranks(n, 0.95) == (lo, hi)


def test_median_ci_ranks_at_other_levels():
    assert metrics.median_ci_ranks(20, 0.99) == (4, 17)  # 2·P(B<=3) = 0.0026; 2·P(B<=4) = 0.012
    assert metrics.median_ci_ranks(20, 0.90) == (6, 15)  # 2·P(B<=6) = 0.115 > 0.10
    assert metrics.median_ci_ranks(100, 0.90) == (42, 59)


@pytest.mark.parametrize("confidence", [0.90, 0.95, 0.99])
def test_coverage_is_at_least_nominal_for_every_n_and_the_interval_is_the_shortest(confidence):
    n_min = 6 if confidence <= 0.95 else 8  # below: not even the full range covers the level
    for n in range(n_min, 201):
        k, k_hi = metrics.median_ci_ranks(n, confidence)
        assert k_hi == n + 1 - k
        cov = _exact_coverage(n, k)
        assert cov >= Fraction(str(confidence)), (n, k, float(cov))
        assert metrics.median_ci_coverage(n, confidence) == pytest.approx(float(cov), abs=1e-15)
        if 2 * (k + 1) <= n + 1:  # one rank further in would fall below the level
            assert _exact_coverage(n, k + 1) < Fraction(str(confidence)), (n, k)


def test_too_few_samples_give_the_full_range_and_say_what_it_covers():
    assert metrics.median_ci([3.0, 1.0, 2.0, 5.0, 4.0]) == (1.0, 5.0)
    assert metrics.median_ci_coverage(5) == pytest.approx(1 - 2 / 32)


def test_median_ci_picks_those_order_statistics():
    xs = list(range(100, 121))  # n = 21, shuffled
    random.Random(1).shuffle(xs)
    assert metrics.median_ci(xs) == (105, 115)  # x_(6), x_(16)
    lo, hi = metrics.median_ci([float(v) for v in range(1, 101)])
    assert (lo, hi) == (40.0, 61.0)


def test_median_ci_ranks_stay_fast_and_near_the_normal_rule_for_large_n():
    k, k_hi = metrics.median_ci_ranks(20000)
    half = metrics.z_two_sided(0.95) * math.sqrt(20000) / 2
    assert abs(k - (10000 - half)) <= 2 and k_hi == 20001 - k


def test_normal_quantile_is_the_standard_librarys():
    assert metrics.z_two_sided(0.95) == pytest.approx(1.959963984540054, abs=1e-12)
    assert metrics.z_two_sided(0.99) == pytest.approx(2.5758293035489, abs=1e-12)
    with pytest.raises(ValueError):
        metrics.z_two_sided(1.0)


def test_sequential_levels_spend_at_most_the_miss_probability_over_all_looks():
    levels = [metrics.sequential_confidence(j) for j in range(1, 100001)]
    assert levels[0] == pytest.approx(1 - 0.05 * 6 / math.pi**2)
    assert all(a < b for a, b in zip(levels[:1000], levels[1:1000]))  # later looks are stricter
    assert sum(1 - lv for lv in levels) <= 0.05
    assert sum(1 - lv for lv in levels) > 0.0499  # and spend nearly all of it
    with pytest.raises(ValueError):
        metrics.sequential_confidence(0)
