"""Intervals for a detector's scores, from the standard library only (no scipy is pinned).

- ``wilson(k, n)``: a proportion k/n (detection rate, precision, recall, localisation) with the Wilson score
  interval, which keeps its coverage near 0 and 1, where detectors live (Brown, Cai, DasGupta 2001).
- ``poisson_rate(k, exposure)``: k events over an exposure (false alarms per hour of clean training), with
  Garwood's exact interval, found by bisection on the Poisson CDF (the chi-square quantiles it is usually
  written with need scipy).
- ``median_interval(xs)``: the median with the distribution-free interval between two order statistics
  (the binomial(n, 1/2) argument), so a time to detect says how well a handful of trials pins it.
- ``bootstrap(values, stat, seed)``: a percentile interval of a statistic of the trials (F1, which is no
  simple proportion), resampling trials with a seeded generator: the same trials give the same interval.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054
"""The two-sided 95% normal quantile."""


@dataclass(frozen=True)
class Estimate:
    """A value and its 95% interval (``lo``, ``hi``); ``value`` is None where there is nothing to estimate."""

    value: float | None
    lo: float | None
    hi: float | None

    def as_dict(self) -> dict:
        return {"value": self.value, "lo": self.lo, "hi": self.hi}


NONE = Estimate(None, None, None)


def wilson(k: int, n: int, z: float = Z95) -> Estimate:
    """k successes of n, with the Wilson score interval; nothing to estimate when n is 0."""
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return NONE
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Estimate(p, max(0.0, centre - half), min(1.0, centre + half))


def _poisson_cdf(k: int, mu: float) -> float:
    """P(X <= k) for X ~ Poisson(mu), summed in log space (k is a count of events, small here)."""
    if mu <= 0:
        return 1.0
    return math.fsum(math.exp(i * math.log(mu) - mu - math.lgamma(i + 1)) for i in range(k + 1))


def _solve(f: Callable[[float], float], target: float, hi: float) -> float:
    """The mu where the decreasing ``f(mu)`` crosses ``target``, by bisection on [0, hi]."""
    lo = 0.0
    while f(hi) > target:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > target else (lo, mid)
    return (lo + hi) / 2


def poisson_rate(k: int, exposure: float, alpha: float = 0.05) -> Estimate:
    """k events over ``exposure`` (hours, say): the rate k/exposure with Garwood's exact interval."""
    if k < 0:
        raise ValueError(f"need a count >= 0, got {k}")
    if exposure <= 0:
        return NONE
    lo = 0.0 if k == 0 else _solve(lambda mu: _poisson_cdf(k - 1, mu), 1 - alpha / 2, k + 1.0)
    hi = _solve(lambda mu: _poisson_cdf(k, mu), alpha / 2, k + 1.0)
    return Estimate(k / exposure, lo / exposure, hi / exposure)


def median_interval(xs: Sequence[float], confidence: float = 0.95) -> Estimate:
    """The median and the narrowest order-statistic interval [x(j), x(n+1-j)] covering it at ``confidence``.

    With fewer than 6 values no such pair reaches 95%: the interval is then the whole range, said as such by
    the caller's table (it is the honest answer for 5 trials)."""
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return NONE
    med = statistics.median(s)

    def coverage(j: int) -> float:  # P(x(j) <= median <= x(n+1-j)) = 1 - 2 P(Bin(n, 1/2) < j)
        return 1 - 2 * math.fsum(math.comb(n, i) for i in range(j)) / 2**n

    j = 1
    while j + 1 <= (n + 1) // 2 and coverage(j + 1) >= confidence:
        j += 1
    return Estimate(med, s[j - 1], s[n - j])


def bootstrap(items: Sequence, stat: Callable[[Sequence], float | None], *, seed: int, n_boot: int = 2000) -> Estimate:
    """``stat(items)`` with a 95% percentile interval from ``n_boot`` seeded resamples of the items."""
    value = stat(items)
    if value is None or not items:
        return Estimate(value, None, None)
    rng = random.Random(seed)
    reps = sorted(v for v in (stat(rng.choices(items, k=len(items))) for _ in range(n_boot)) if v is not None)
    if not reps:
        return Estimate(value, None, None)
    return Estimate(value, reps[int(0.025 * (len(reps) - 1))], reps[int(math.ceil(0.975 * (len(reps) - 1)))])
