"""The 95% interval of a mean over rounds (Student's t), and how many rounds would narrow it to a target; the
median over rounds with its distribution-free interval, which a few rounds far off (a burst of load) do not
widen.

Pure standard library; scripts/suite_cost.py and scripts/timing_vs_bare.py read their rounds with it."""

from __future__ import annotations

import math
import statistics


_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}


def t_quantile(confidence: float, df: int) -> float:
    """Student's t two-sided quantile (Cornish-Fisher expansion of the normal's; within 1% for df >= 3; the
    table's value at 95% for df 1 to 5)."""
    if confidence == 0.95 and df in _T95:
        return _T95[df]
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


def mean_ci(values: list[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of ``values``, one per round; one round: its value, an unbounded interval."""
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, -math.inf, math.inf
    half = t_quantile(confidence, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return m, m - half, m + half


def rounds_for(values: list[float], half_width: float, confidence: float = 0.95) -> int | None:
    """Rounds whose interval would be ``half_width`` wide each side at the spread ``values`` show (None: one
    round, no spread known)."""
    if len(values) < 2:
        return None
    sd = statistics.stdev(values)
    if sd == 0:
        return len(values)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    return max(len(values), math.ceil((z * sd / half_width) ** 2))


def median_ci(values: list[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high) of ``values``, one per round: the interval between the k-th smallest and the k-th
    largest value, k the largest whose chance that the true median lies outside is at most ``1 - confidence``
    (the sign test's binomial(n, 1/2)); unbounded where no k is (fewer than 6 rounds at 95%)."""
    xs, n = sorted(values), len(values)
    m = statistics.median(xs)
    tail, k, out = 0.0, 0, (1 - confidence) / 2  # P(Bin(n, 1/2) <= j) for j = 0, 1, ...
    for j in range(n):
        tail += math.comb(n, j) / 2**n
        if tail > out:
            break
        k = j + 1
    if k == 0:
        return m, -math.inf, math.inf
    return m, xs[k - 1], xs[n - k]
