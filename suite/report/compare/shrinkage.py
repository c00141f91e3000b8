"""Per-case noise by empirical Bayes: moderated variances and the Student t quantile they need.

Each case has its own between-run variance s_i² with d_i degrees of freedom (its runs' spread). With
two or three runs a side d_i is 2-4, so s_i² alone is a poor estimate (a chi-square with few degrees
of freedom is often far below its mean), and one pooled variance for all cases is wrong when some
cases are much noisier than others. The standard compromise treats the true variances as drawn from a
scaled inverse chi-square prior (d0, s0²), fits d0 and s0² to all the cases' s_i² by moments of log s_i²,
and uses each case's posterior variance

    s̃_i² = (d0·s0² + d_i·s_i²) / (d0 + d_i),   with a t distribution of d0 + d_i degrees of freedom:

a case with many runs keeps its own variance, one with few is pulled toward the pooled value, and the
pull is weak when the cases' variances really differ (small d0). Smyth, "Linear models and empirical
Bayes methods for assessing differential expression in microarray experiments", Stat. Appl. Genet.
Mol. Biol. 3(1), 2004, §6 (limma's ``squeezeVar``/``fitFDist``).

No SciPy: digamma, trigamma and the t quantile are computed here (series and a continued fraction,
Numerical Recipes §6.1, §6.4), accurate to ~1e-9, far below what a comparison needs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

_NORMAL = statistics.NormalDist()


def digamma(x: float) -> float:
    r = 0.0
    while x < 6.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return r + math.log(x) - 0.5 / x - f * (1 / 12 - f * (1 / 120 - f * (1 / 252)))


def trigamma(x: float) -> float:
    r = 0.0
    while x < 6.0:
        r += 1.0 / (x * x)
        x += 1.0
    f = 1.0 / (x * x)
    return r + 1.0 / x + f / 2 + f / x * (1 / 6 - f * (1 / 30 - f * (1 / 42 - f / 30)))


def trigamma_inverse(y: float) -> float:
    """x > 0 with trigamma(x) = y (trigamma decreases from +inf to 0): bisection in log x."""
    lo, hi = 1e-8, 1e8
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if trigamma(mid) > y:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def fit_prior(variances: Sequence[float], dfs: Sequence[float]) -> tuple[float, float]:
    """(s0², d0) of the scaled inverse chi-square prior fitted to the cases' variances (each with its
    degrees of freedom > 0) by the moments of log s² (Smyth 2004, §6.2). d0 = inf when the variances
    spread no more than sampling alone explains (then every case gets s0²)."""
    pairs = [(max(v, 1e-300), d) for v, d in zip(variances, dfs) if d > 0]
    if not pairs:
        raise ValueError("fit_prior needs at least one variance with degrees of freedom > 0")
    e = [math.log(v) - digamma(d / 2) + math.log(d / 2) for v, d in pairs]
    mean = statistics.fmean(e)
    if len(e) < 2:
        return math.exp(mean), 0.0
    excess = statistics.variance(e) - statistics.fmean(trigamma(d / 2) for _, d in pairs)
    if excess <= 0:
        return math.exp(mean), math.inf
    d0 = 2.0 * trigamma_inverse(excess)
    return math.exp(mean + digamma(d0 / 2) - math.log(d0 / 2)), d0


def posterior(variance: float, df: float, s0_sq: float, d0: float) -> tuple[float, float]:
    """(s̃², degrees of freedom) of one case: its variance shrunk toward the prior's s0²."""
    if math.isinf(d0):
        return s0_sq, math.inf
    if d0 + df <= 0:
        return s0_sq, 0.0
    return (d0 * s0_sq + df * variance) / (d0 + df), d0 + df


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes §6.4)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-13:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (normal when df is infinite)."""
    if math.isinf(df):
        return 2.0 * (1.0 - _NORMAL.cdf(abs(t)))
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_pdf(t: float, df: float) -> float:
    """Student's t density."""
    c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(c - (df + 1) / 2 * math.log1p(t * t / df))


def t_two_sided(confidence: float, df: float) -> float:
    """t > 0 with P(|T| <= t) = confidence for Student's t with ``df`` > 0 degrees of freedom: Newton's
    method in log t from the normal quantile (t >= z), bisection where a step would leave the bracket."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    z = _NORMAL.inv_cdf((1 + confidence) / 2)
    if math.isinf(df) or df > 1e7:
        return z
    target, lo, hi, u = 1 - confidence, math.log(z), math.log(1e12), math.log(z)
    for _ in range(200):
        t = math.exp(u)
        f = t_two_sided_p(t, df) - target  # decreasing in u
        if f > 0:
            lo = u
        else:
            hi = u
        slope = 2 * t_pdf(t, df) * t
        nu = u + f / slope if slope > 0 else hi
        if not lo < nu < hi:
            nu = (lo + hi) / 2
        if abs(nu - u) < 1e-12:
            return math.exp(nu)
        u = nu
    return math.exp(u)


def normal_quantile(p: float) -> float:
    """The standard normal quantile at probability ``p``."""
    return _NORMAL.inv_cdf(p)
