"""The statistics of a comparison (the method: ``suite.report.compare``): each case's run medians and
their within-run bootstrap, its between-run noise (shrunk by ``suite.report.compare.shrinkage``), its
simultaneous interval, p-values (Holm), verdict and the runs that would resolve it; and the overall
median ratio with its bootstrap interval.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import numpy as np

import suite.report.compare.shrinkage as shrinkage
from suite.report.compare.verdicts import CaseComparison, verdict

N_BOOT = 2000
POWER = 0.8
"""``runs_needed``: the runs per side that resolve a case with this probability (at its measured ratio)."""
MAX_RUNS = 1000


def _boot_medians(rng: np.random.Generator, x: np.ndarray, n_boot: int) -> np.ndarray:
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    return np.median(x[idx], axis=1)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (Holm 1979), same order as given."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: (math.isnan(pvalues[i]), pvalues[i]))
    adj = [math.nan] * m
    running = 0.0
    for rank, i in enumerate(order):
        p = pvalues[i]
        if math.isnan(p):
            continue
        running = max(running, min(1.0, (m - rank) * p))
        adj[i] = running
    return adj


def _samples(rec: dict) -> np.ndarray:
    s = rec.get("samples_us")
    if s:
        return np.asarray(s, dtype=float)
    return np.asarray([rec["time_us"]], dtype=float)  # a record without samples: its median only


def _boot_log_median_of_runs(rng: np.random.Generator, runs: list[np.ndarray], n_boot: int) -> np.ndarray:
    """Bootstrap of log(median over runs of each run's median), resampling samples within each run:
    the within-run part of the uncertainty (the between-run part is added by ``judge_cases``)."""
    if len({len(x) for x in runs}) == 1:  # runs of one length: all resampled at once
        xs = np.stack(runs)  # k x n
        idx = rng.integers(0, xs.shape[1], size=(n_boot, *xs.shape))
        per_run = np.median(np.take_along_axis(xs[None], idx, axis=2), axis=2)  # n_boot x k
    else:
        per_run = np.stack([_boot_medians(rng, x, n_boot) for x in runs], axis=1)  # n_boot x k
    return np.log(np.maximum(np.median(per_run, axis=1), 1e-300))


def ratio_interval(
    base_samples: Sequence[float],
    new_samples: Sequence[float],
    confidence: float = 0.95,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> tuple[float, float, float]:
    """median(new) / median(base) of two cases of one run, and its percentile interval at ``confidence`` from
    the within-run bootstrap that ``collect_cases`` uses (each side's samples resampled; fixed seed, so every
    caller gets the same interval from the same samples). The run-to-run part is not in it: one run cannot
    see it (``suite.report.compare``)."""
    rng = np.random.default_rng(seed)
    b, x = np.asarray(base_samples, dtype=float), np.asarray(new_samples, dtype=float)
    boot = _boot_log_median_of_runs(rng, [x], n_boot) - _boot_log_median_of_runs(rng, [b], n_boot)
    lo, hi = np.exp(np.percentile(boot, [50 * (1 - confidence), 50 * (1 + confidence)]))
    return float(np.median(x) / np.median(b)), float(lo), float(hi)


def _median_factor(k: int) -> float:
    """Variance of the median of k runs' log medians, in units of one run's variance / k: 1 for a
    mean (k <= 2), else π/2 (the median's large-k efficiency; exact: 1.35 at k = 3, 1.44 at k = 5)."""
    return 1.0 if k <= 2 else math.pi / 2


@functools.lru_cache(maxsize=4096)
def _quantile(level: float, df: float) -> float:
    """Two-sided Student t quantile; fewer than one degree of freedom are taken as one (Cauchy)."""
    return shrinkage.t_two_sided(level, max(df, 1.0))


def case_noise(
    base_logs: list[np.ndarray], new_logs: list[np.ndarray], diffs: np.ndarray
) -> tuple[list[tuple[float, float]], float, float, str]:
    """Per case (variance, degrees of freedom) of one run's log median; the pooled prior's sd and
    degrees of freedom; and how they were obtained.

    With two or more runs on a side: each case's spread of run medians about each side's mean
    (d_i = k_b − 1 + k_n − 1), shrunk toward the prior fitted to all the cases (``suite.report.compare.shrinkage``).
    With one run on each side no case's own noise can be seen: every case is assumed as noisy as the
    spread of the cases' log ratios about their median says, / sqrt(2) (each log ratio is the
    difference of two runs' log medians); that assumes most cases did not change (see
    ``suite.report.compare``)."""
    ss_df = []
    for lb, lx in zip(base_logs, new_logs):
        ss = sum(float(np.sum((v - v.mean()) ** 2)) for v in (lb, lx) if len(v) > 1)
        ss_df.append((ss, len(lb) + len(lx) - 2))
    measured = [(ss / df, df) for ss, df in ss_df if df > 0]
    if measured:
        s0_sq, d0 = shrinkage.fit_prior([v for v, _ in measured], [d for _, d in measured])
        per_case = [shrinkage.posterior(ss / df if df else s0_sq, df, s0_sq, d0) for ss, df in ss_df]
        prior = (
            "the cases' spreads differ no more than sampling explains: every case gets the pooled value"
            if math.isinf(d0)
            else f"prior of {d0:z.3g} degrees of freedom"
        )
        return (
            per_case,
            math.sqrt(s0_sq),
            d0,
            f"per case from the runs' medians ({len(measured)} case(s) measured), shrunk toward the pooled sd "
            f"{math.sqrt(s0_sq):z.3g} ({prior}; Smyth 2004)",
        )
    if len(diffs) < 2:
        note = "one run per side and a single case: between-run variation unknown, not included"
        return [(0.0, math.inf)] * len(ss_df), 0.0, math.inf, note
    dev = diffs - np.median(diffs)
    s = float(np.sqrt(np.mean(dev**2)) / math.sqrt(2.0))
    return (
        [(s * s, math.inf)] * len(ss_df),
        s,
        math.inf,
        "one run per side: no case's own noise can be seen; every case is assumed as noisy as the "
        "spread of the cases' ratios says (a noisier case can be called slower or faster by chance; "
        "REPEAT=2 or more per side measures each case's)",
    )


def _runs_needed(di: float, boot_var: float, k_now: float, var: float, d0: float, level: float, tol: float) -> int:
    """The runs per side at which a case's interval would lie on one side of the nearest tolerance
    boundary with probability ``POWER``, if its log ratio is ``di`` and its noise ``var``: the smallest
    k with (q_k + z_power)·se_k <= that distance (the usual sample-size rule); MAX_RUNS + 1 if none."""
    dist = min(abs(di - math.log1p(tol)), abs(di - math.log1p(-tol)))
    z = shrinkage.normal_quantile(POWER)

    def enough(k: int) -> bool:
        df = d0 + 2 * (k - 1) if not math.isinf(d0) else math.inf
        se = math.sqrt(max(boot_var * k_now / k, var * 2 * _median_factor(k) / k))
        return (_quantile(level, df) + z) * se <= dist

    for k in range(1, 33):  # the median's factor makes small k non-monotone: walk them
        if enough(k):
            return k
    if not enough(MAX_RUNS):
        return MAX_RUNS + 1
    lo, hi = 32, MAX_RUNS  # enough(hi), not enough(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def _run_shift_boot(
    rng: np.random.Generator, base_logs: list[np.ndarray], new_logs: list[np.ndarray], kb: int, kn: int, n_boot: int
) -> np.ndarray:
    """m x n_boot: for each draw, the same runs picked (with replacement) on each side for every case,
    and each case's log ratio of the picked runs' median about its all-runs value. Added to the
    cases' within-run bootstraps, it puts a shift common to a whole run (a busier machine, other
    clocks) into the overall interval, which resampling cases alone cannot."""
    picks_b = rng.integers(0, kb, size=(n_boot, kb))
    picks_n = rng.integers(0, kn, size=(n_boot, kn))
    out = []
    for lb, lx in zip(base_logs, new_logs):  # a case missing from some runs uses the runs it has
        db = np.median(lb[picks_b % len(lb)], axis=1) - np.median(lb)
        dn = np.median(lx[picks_n % len(lx)], axis=1) - np.median(lx)
        out.append(dn - db)
    return np.stack(out)


def collect_cases(bmap: dict, nmap: dict, keys: list[tuple], rng: np.random.Generator, n_boot: int):
    """Per comparable case (key, base median, new median, base log medians, new log medians, within-run
    bootstrap of log r); and the cases with no positive median time in some run."""
    pts, unusable = [], []
    for k in keys:
        b = [_samples(r) for r in bmap[k]]
        x = [_samples(r) for r in nmap[k]]
        mb = np.asarray([np.median(v) for v in b])
        mx = np.asarray([np.median(v) for v in x])
        if (mb <= 0).any() or (mx <= 0).any():
            unusable.append(k)
            continue
        boot = _boot_log_median_of_runs(rng, x, n_boot) - _boot_log_median_of_runs(rng, b, n_boot)
        pts.append((k, float(np.median(mb)), float(np.median(mx)), np.log(mb), np.log(mx), boot))
    return pts, unusable


def identical_sides(bmap: dict, nmap: dict, keys: list[tuple]) -> bool:
    """Whether every one of ``keys`` has the same runs' samples on both sides (in any order of the runs):
    a run, or a set of runs, compared with itself."""

    def runs(recs: list[dict]) -> list[tuple]:
        return sorted(tuple(_samples(r).tolist()) for r in recs)

    return bool(keys) and all(runs(bmap[k]) == runs(nmap[k]) for k in keys)


def judge_cases(pts, noise, d0: float, alpha: float, tolerance: float, identical: bool = False) -> list[CaseComparison]:
    """Each case's interval (simultaneous at 1 − alpha over the cases, Bonferroni), p-values, verdict,
    the measured ratios beyond which it would be called slower or faster at its noise (the interval's
    half-width q·se does not depend on the ratio, so these are exactly the gate's thresholds) and, when
    inconclusive, the runs per side that would resolve it. ``identical``: both sides hold the same
    samples, so every ratio is exactly 1 and there is no noise to estimate."""
    m = len(pts)
    level = 1 - alpha / max(m, 1)
    rows = []
    for (k, mb, mx, lb, lx, boot), (var, df) in zip(pts, noise):
        di = math.log(mx / mb)
        # the case's between-run variance per side; a run median's spread already holds its samples'
        # noise, so the within-run bootstrap is a floor (a run is never more precise than its samples)
        boot_var = 0.0 if identical else float(np.var(boot))
        var = 0.0 if identical else var
        se = math.sqrt(max(boot_var, var * (_median_factor(len(lb)) / len(lb) + _median_factor(len(lx)) / len(lx))))
        q = _quantile(level, df)
        p = shrinkage.t_two_sided_p(di / se, max(df, 1.0)) if se > 0 else (1.0 if di == 0 else 0.0)
        lo, hi = math.exp(di - q * se), math.exp(di + q * se)
        v = verdict(lo, hi, tolerance)
        need = None
        if v == "inconclusive":
            need = _runs_needed(di, boot_var, (len(lb) + len(lx)) / 2, var, d0, level, tolerance)
            need = max(need, max(len(lb), len(lx)) + 1)
        rows.append(
            CaseComparison(
                key=k,
                base_median_us=mb,
                new_median_us=mx,
                ratio=mx / mb,
                ci_low=lo,
                ci_high=hi,
                p_value=p,
                verdict=v,
                base_runs=len(lb),
                new_runs=len(lx),
                noise_sd=math.sqrt(var),
                noise_df=df,
                runs_needed=need,
                detect_slower=(1 + tolerance) * math.exp(q * se),
                detect_faster=(1 - tolerance) * math.exp(-q * se),
            )
        )
    adj = holm([r.p_value for r in rows])
    return [dataclasses.replace(r, p_adjusted=a) for r, a in zip(rows, adj)]


def overall_interval(pts, kb: int, kn: int, rng: np.random.Generator, n_boot: int, confidence: float):
    """The median case ratio and its percentile interval: a bootstrap that resamples the cases (and,
    per case, its within-run bootstrap): the spread between cases carries their run-to-run
    variation, and a median is not dragged by the few cases a busy machine slowed by 10x in one
    run; with several runs a side, whole runs are resampled too (a run slower as a whole is in it)."""
    m = len(pts)
    boot_cases = np.stack([p[5] for p in pts])  # m x n_boot
    if kb > 1 or kn > 1:
        boot_cases = boot_cases + _run_shift_boot(rng, [p[3] for p in pts], [p[4] for p in pts], kb, kn, n_boot)
    pick = rng.integers(0, m, size=(n_boot, m))
    gboot = np.median(boot_cases[pick, np.arange(n_boot)[:, None]], axis=1)
    glo, ghi = (math.exp(float(v)) for v in np.percentile(gboot, [50 * (1 - confidence), 50 * (1 + confidence)]))
    gm = math.exp(float(np.median([math.log(p[2] / p[1]) for p in pts])))
    return gm, (glo, ghi)
