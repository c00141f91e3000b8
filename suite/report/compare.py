"""Compare runs case by case: time ratios with confidence intervals, four verdicts and a CI gate.

Cases are matched across runs by their identity (``case_identity.case_key``: the fields the case
declares in its record's ``identity``, e.g. experiment, op, variant, backend, device,
dtype, world_size, size_bytes, in_place, redop, root, src/dst, ...).

Each side is one run or several runs of the same commit (``make bench-cpu REPEAT=k``:
run ids ``<id>-r1`` .. ``<id>-rk``). Every run of a case is reduced to its median
(``samples_us``: the per-iteration cross-rank times); the statistics work on these
run-level medians, because iterations of one run are not replicates of a run: the
machine's state between runs (other load, frequency, placement) varies more than
iterations within one run do. For each matched case, with k_b base and k_n new runs:

- ratio r = median of the new run medians / median of the base run medians (> 1:
  the new side is slower); with one run per side, the ratio of the two medians;
- in log space, var(log r) = max(within, between): *between* is σ_i²·(c(k_b)/k_b + c(k_n)/k_n),
  σ_i the between-run sd of one run's log median **of this case** (c(k) = 1 for k <= 2, else
  π/2: a median of k runs, not a mean); a run median's spread already holds its samples' noise,
  so *within*, the bootstrap variance of log r from resampling every run's samples (fixed seed,
  so reports are reproducible; Efron & Tibshirani, An Introduction to the Bootstrap, 1993,
  ch. 13), is only a floor: a run is never more precise than its samples say;
  - with two or more runs on a side, σ_i² is the case's own spread of run medians about each
    side's mean, shrunk toward the value pooled over the cases (an empirical-Bayes scaled
    inverse chi-square prior fitted to all the cases' spreads; Smyth 2004, see
    ``suite.report.shrinkage``): a case with few runs is pulled toward the pooled value, and little
    when the cases' noise really differs; the interval then uses Student's t with the
    posterior's degrees of freedom;
  - **with one run per side** (the comparison says so) no case's own noise can be seen. Every
    case is *assumed* as noisy as the comparison's cases are on average: σ = rms(log r_i −
    median_i log r_i) / √2 over the cases (each log ratio is the difference of two runs' log
    medians), which assumes most cases did not change. A case noisier than the others can then
    be called slower or faster by chance; a change common to every case, or a machine
    uniformly slower during one of the two runs, is not in σ. Only several runs per side
    (ideally interleaved A/B/A/B) measure each case's noise;
- the case's interval is log r ± q·sqrt(within + between), q for the level 1 − alpha
  *simultaneously over the m cases* (Bonferroni: two-sided 1 − alpha/m each);
- a two-sided p-value of log r = 0 from the same variance, Holm-adjusted over the cases
  (shown: whether the case changed at all, within the tolerance or not).

Verdict per case: *slower* when the interval lies above 1 + tolerance, *faster* when it lies
below 1 − tolerance, *same* when it lies inside [1 − tolerance, 1 + tolerance], else
*inconclusive*: the data can tell neither a change beyond the tolerance nor its absence. The
tolerance (default 5%) is the practical margin below which a change does not matter. alpha is
the family-wise error rate of these verdicts: runs of one commit call any case slower or faster
with probability <= alpha. For an inconclusive case, ``runs_needed``: the runs per side
(REPEAT=k) at which, with its noise, the interval would lie on one side of a tolerance
boundary (inside the band, or beyond it) with 80% probability if the ratio is what was measured.

Overall: the median of the case ratios, with a percentile interval (level 1 − alpha) from a
bootstrap that resamples the cases together with each case's within-run bootstrap (and whole
runs, with several per side), so the spread between cases (their run-to-run variation) is in
it; it is what catches a small slowdown spread over many noisy cases. A median, not the
geometric mean: on a shared machine a run has a few cases that a burst of other load slowed
10x, and they drag a mean across the tolerance (two runs of one commit: geometric mean 0.76,
median 0.90). The same four verdicts apply to it.

Settings that change what a case measures (pipeline depth, hosts, iterations, warm-up, the
torch/backend versions, an experiment's model knobs) are compared first (``settings_differences``):
cases they affect get no verdict (``refused``) unless ``allow_settings_diff``.

Gate (exit status of ``python -m suite.report compare``): **FAIL** (1) if the overall verdict or
any case is *slower*; else **INCONCLUSIVE** (3) if the overall verdict is inconclusive or more
than ``max_inconclusive`` (a fraction, default 10%) of the cases could not be judged
(inconclusive, or refused for differing settings); else **PASS** (0). 2 on unreadable input.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from suite.report import shrinkage
from suite.report.case_identity import describe_key, records_by_case
from suite.report.case_identity import MEASUREMENT_FIELDS, case_key  # noqa: F401 (analysis.py reads them here)
from suite.report.case_settings import settings_differences

DEFAULT_TOLERANCE = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_MAX_INCONCLUSIVE = 0.1
"""The gate does not PASS when more than this fraction of the cases could not be judged."""
N_BOOT = 2000
POWER = 0.8
"""``runs_needed``: the runs per side that resolve a case with this probability (at its measured ratio)."""
MAX_RUNS = 1000
VERDICTS = ("slower", "faster", "same", "inconclusive")


@dataclass(frozen=True, kw_only=True)
class CaseComparison:
    key: tuple
    base_median_us: float
    new_median_us: float
    ratio: float
    """median(new) / median(base); > 1 means slower."""
    ci_low: float
    ci_high: float
    p_value: float
    """Two-sided p-value of log ratio = 0 (Student's t with the case's variance and degrees of freedom; unadjusted)."""
    p_adjusted: float = math.nan
    """Holm-adjusted p-value over the comparison's cases."""
    verdict: str = "same"
    base_runs: int = 1
    """How many runs of the base side have this case."""
    new_runs: int = 1
    noise_sd: float = 0.0
    """This case's between-run sd of one run's log median (its own, shrunk toward the pooled value)."""
    noise_df: float = math.inf
    """Degrees of freedom of ``noise_sd`` (inf: assumed, not measured)."""
    runs_needed: int | None = None
    """Inconclusive cases: the runs per side that would resolve it; MAX_RUNS + 1 stands for more."""


@dataclass(frozen=True, kw_only=True)
class Comparison:
    base_name: str
    new_name: str
    cases: list[CaseComparison]
    overall_ratio: float
    """The median over cases of the case ratios."""
    overall_ci: tuple[float, float]
    overall: str
    only_base: list[tuple] = field(default_factory=list)
    only_new: list[tuple] = field(default_factory=list)
    unusable: list[tuple] = field(default_factory=list)
    """Cases in both sides with no positive median time in some run: not compared (and said so)."""
    refused: list[tuple] = field(default_factory=list)
    """Cases in both sides that settings differing between the sides affect: no verdict."""
    settings_diffs: list[str] = field(default_factory=list)
    """The settings that differ between the sides, one line each (see ``settings_differences``)."""
    tolerance: float = DEFAULT_TOLERANCE
    alpha: float = DEFAULT_ALPHA
    max_inconclusive: float = DEFAULT_MAX_INCONCLUSIVE
    base_runs: int = 1
    new_runs: int = 1
    between_run_sd: float = 0.0
    """The pooled between-run sd of one run's log median: the prior each case's own is shrunk toward."""
    prior_df: float = math.inf
    """Degrees of freedom of that prior (inf: every case gets the pooled value)."""
    between_run_note: str = ""
    """How the cases' noise was obtained (several runs per side, or the one-run-each assumption)."""

    @property
    def confidence(self) -> float:
        return 1.0 - self.alpha

    @property
    def regressions(self) -> list[CaseComparison]:
        """Cases whose simultaneous interval lies beyond 1 + tolerance."""
        return [c for c in self.cases if c.verdict == "slower"]

    @property
    def inconclusive(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.verdict == "inconclusive"]

    @property
    def not_judged(self) -> int:
        """Cases that could have been judged and were not: inconclusive, or refused for their settings."""
        return len(self.inconclusive) + len(self.refused)

    @property
    def gate(self) -> str:
        """FAIL (a regression), INCONCLUSIVE (too much could not be judged) or PASS."""
        if self.overall == "slower" or self.regressions:
            return "FAIL"
        if self.overall == "inconclusive" or self.not_judged > self.max_inconclusive * (
            len(self.cases) + len(self.refused)
        ):
            return "INCONCLUSIVE"
        return "PASS"

    @property
    def failed(self) -> bool:
        return self.gate == "FAIL"

    @property
    def exit_status(self) -> int:
        return {"FAIL": 1, "INCONCLUSIVE": 3, "PASS": 0}[self.gate]


def verdict(ci_low: float, ci_high: float, tolerance: float) -> str:
    """slower / faster: the interval lies beyond the tolerance; same: inside it; else inconclusive."""
    if ci_low > 1.0 + tolerance:
        return "slower"
    if ci_high < 1.0 - tolerance:
        return "faster"
    if ci_low >= 1.0 - tolerance and ci_high <= 1.0 + tolerance:
        return "same"
    return "inconclusive"


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
    the within-run part of the uncertainty (the between-run part is added by ``compare_runs``)."""
    if len({len(x) for x in runs}) == 1:  # runs of one length: all resampled at once
        xs = np.stack(runs)  # k x n
        idx = rng.integers(0, xs.shape[1], size=(n_boot, *xs.shape))
        per_run = np.median(np.take_along_axis(xs[None], idx, axis=2), axis=2)  # n_boot x k
    else:
        per_run = np.stack([_boot_medians(rng, x, n_boot) for x in runs], axis=1)  # n_boot x k
    return np.log(np.maximum(np.median(per_run, axis=1), 1e-300))


def _median_factor(k: int) -> float:
    """Variance of the median of k runs' log medians, in units of one run's variance / k: 1 for a
    mean (k <= 2), else π/2 (the median's large-k efficiency; exact: 1.35 at k = 3, 1.44 at k = 5)."""
    return 1.0 if k <= 2 else math.pi / 2


@functools.lru_cache(maxsize=4096)
def _quantile(level: float, df: float) -> float:
    """Two-sided Student t quantile; fewer than one degree of freedom are taken as one (Cauchy)."""
    return shrinkage.t_two_sided(level, max(df, 1.0))


def _case_noise(
    base_logs: list[np.ndarray], new_logs: list[np.ndarray], diffs: np.ndarray
) -> tuple[list[tuple[float, float]], float, float, str]:
    """Per case (variance, degrees of freedom) of one run's log median; the pooled prior's sd and
    degrees of freedom; and how they were obtained.

    With two or more runs on a side: each case's spread of run medians about each side's mean
    (d_i = k_b − 1 + k_n − 1), shrunk toward the prior fitted to all the cases (``suite.report.shrinkage``).
    With one run on each side no case's own noise can be seen: every case is assumed as noisy as the
    spread of the cases' log ratios about their median says, / sqrt(2) (each log ratio is the
    difference of two runs' log medians); that assumes most cases did not change (see the module
    docstring)."""
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
            else f"prior of {d0:.3g} degrees of freedom"
        )
        return (
            per_case,
            math.sqrt(s0_sq),
            d0,
            f"per case from the runs' medians ({len(measured)} case(s) measured), shrunk toward the pooled sd "
            f"{math.sqrt(s0_sq):.3g} ({prior}; Smyth 2004)",
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


# --- the comparison ------------------------------------------------------------------------------


def compare_records(base: list[dict], new: list[dict], **kw) -> "Comparison":
    """Compare one run's records with another's (``compare_runs`` with one run per side)."""
    return compare_runs([base], [new], **kw)


def _collect(bmap: dict, nmap: dict, keys: list[tuple], rng: np.random.Generator, n_boot: int):
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


def _judge_cases(pts, noise, d0: float, alpha: float, tolerance: float) -> list[CaseComparison]:
    """Each case's interval (simultaneous at 1 − alpha over the cases, Bonferroni), p-values, verdict
    and, when inconclusive, the runs per side that would resolve it."""
    m = len(pts)
    level = 1 - alpha / max(m, 1)
    rows = []
    for (k, mb, mx, lb, lx, boot), (var, df) in zip(pts, noise):
        di = math.log(mx / mb)
        # the case's between-run variance per side; a run median's spread already holds its samples'
        # noise, so the within-run bootstrap is a floor (a run is never more precise than its samples)
        boot_var = float(np.var(boot))
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
            )
        )
    adj = holm([r.p_value for r in rows])
    return [dataclasses.replace(r, p_adjusted=a) for r, a in zip(rows, adj)]


def _overall(pts, kb: int, kn: int, rng: np.random.Generator, n_boot: int, confidence: float):
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


def compare_runs(
    base_runs: Sequence[Sequence[dict]],
    new_runs: Sequence[Sequence[dict]],
    *,
    base_name: str = "base",
    new_name: str = "new",
    tolerance: float = DEFAULT_TOLERANCE,
    alpha: float = DEFAULT_ALPHA,
    max_inconclusive: float = DEFAULT_MAX_INCONCLUSIVE,
    base_settings: Sequence[dict] = (),
    new_settings: Sequence[dict] = (),
    allow_settings_diff: bool = False,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> "Comparison":
    """Compare the runs of two sides (each a list of runs' records; ``*_settings``: each run's
    ``run_settings``, when known); see the module docstring."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    bmap, nmap = records_by_case(base_runs), records_by_case(new_runs)
    keys = [k for k in bmap if k in nmap]
    diffs, affected = settings_differences(base_settings, new_settings, bmap, nmap, keys)
    refused = [] if allow_settings_diff else [k for k in keys if k in affected]
    rng = np.random.default_rng(seed)
    pts, unusable = _collect(bmap, nmap, [k for k in keys if k not in refused], rng, n_boot)
    d = np.asarray([math.log(p[2] / p[1]) for p in pts])
    noise, sd0, d0, note = _case_noise([p[3] for p in pts], [p[4] for p in pts], d)
    cases = _judge_cases(pts, noise, d0, alpha, tolerance)
    kb, kn = len(base_runs), len(new_runs)
    if cases:
        gm, (glo, ghi) = _overall(pts, kb, kn, rng, n_boot, 1 - alpha)
        overall = verdict(glo, ghi, tolerance)
    else:
        gm, glo, ghi, overall = math.nan, math.nan, math.nan, "no common cases"
    return Comparison(
        base_name=base_name,
        new_name=new_name,
        cases=cases,
        overall_ratio=gm,
        overall_ci=(glo, ghi),
        overall=overall,
        only_base=[k for k in bmap if k not in nmap],
        only_new=[k for k in nmap if k not in bmap],
        unusable=unusable,
        refused=refused,
        settings_diffs=diffs,
        tolerance=tolerance,
        alpha=alpha,
        max_inconclusive=max_inconclusive,
        base_runs=kb,
        new_runs=kn,
        between_run_sd=sd0,
        prior_df=d0,
        between_run_note=note,
    )


# --- output --------------------------------------------------------------------------------------


def runs_text(k: int | None) -> str:
    return "" if k is None else (f">{MAX_RUNS}" if k > MAX_RUNS else str(k))


def _bound(x: float) -> str:
    """An interval bound in 7 characters (a case that cannot tell can have bounds like 1e-13 and 1e13)."""
    return f"{x:7.3f}" if 1e-3 <= x < 1e3 else f"{x:7.1e}"


def count_line(c: Comparison) -> str:
    """'N matched case(s): a slower, b faster, c same, d inconclusive' (+ the refused ones)."""
    n = {v: sum(1 for r in c.cases if r.verdict == v) for v in VERDICTS}
    text = f"{len(c.cases) + len(c.refused)} matched case(s): " + ", ".join(f"{n[v]} {v}" for v in VERDICTS)
    return text + (f", {len(c.refused)} not compared (settings differ)" if c.refused else "")


def repeat_advice(c: Comparison) -> str:
    """How many runs per side would resolve the inconclusive cases ('' when there are none)."""
    needs = sorted(r.runs_needed for r in c.inconclusive if r.runs_needed is not None)
    if not needs:
        return ""
    half, most = needs[(len(needs) - 1) // 2], needs[-1]
    say = lambda k: f"REPEAT={k}" if k <= MAX_RUNS else f"more than {MAX_RUNS} runs"  # noqa: E731
    return (
        f"{len(needs)} case(s) inconclusive: their noise says {say(half)} on each side would resolve half of "
        f"them, {say(most)} all (make bench-cpu REPEAT=k on each commit; the runs column per case), or a "
        f"larger TOLERANCE"
    )


def gate_line(c: Comparison) -> str:
    """The gate's status and why, in one line."""
    total = len(c.cases) + len(c.refused)
    limit = f"MAX_INCONCLUSIVE={c.max_inconclusive:g}"
    if c.gate == "FAIL":
        what = [f"{len(c.regressions)} case(s) slower beyond the tolerance"] if c.regressions else []
        what += ["the overall ratio slower beyond the tolerance"] if c.overall == "slower" else []
        if c.regressions and max(c.base_runs, c.new_runs) == 1:
            what.append(
                "one run per side: each case was assumed as noisy as the others, so a noisier case can be "
                "slower by chance; confirm with REPEAT=2 or more"
            )
        return f"gate: FAIL (regression: {'; '.join(what)})"
    if c.gate == "INCONCLUSIVE":
        why = [
            f"{c.not_judged} of {total} case(s) could not be judged ({len(c.inconclusive)} inconclusive, "
            f"{len(c.refused)} with differing settings; more than {limit} allows)"
        ] * (c.not_judged > c.max_inconclusive * total)
        why += ["the overall interval straddles a tolerance boundary"] * (c.overall == "inconclusive")
        return f"gate: INCONCLUSIVE (no regression found, none ruled out: {'; '.join(why)})"
    return "gate: PASS" + (f" ({c.not_judged} case(s) not judged, within {limit})" if c.not_judged else "")


def format_comparison(c: Comparison, *, show: str = "all") -> str:
    """Text table of a comparison; ``show='changed'`` lists only cases not judged same."""
    names = {r.key: describe_key(r.key) for r in c.cases}
    w = min(90, max([len(n) for n in names.values()] + [4]))
    lines = []
    if c.settings_diffs:
        act = (
            f"{len(c.refused)} case(s) they affect get no verdict (ALLOW_CONFIG_DIFF=1 compares them)"
            if c.refused
            else "every case compared (ALLOW_CONFIG_DIFF, or no case's records differ)"
        )
        lines.append(f"# settings differ between the sides: {act}")
        lines += [f"#   {s}" for s in c.settings_diffs]
    lines += [
        f"# compare: base={c.base_name} ({c.base_runs} run(s))  new={c.new_name} ({c.new_runs} run(s))  "
        f"(ratio = new/base median of run medians; >1 slower; CI {100 - c.alpha * 100:.10g}% simultaneous over the "
        f"cases; tolerance ±{c.tolerance:.0%}; p Holm-adjusted)",
        f"# between-run variation: pooled sd {c.between_run_sd:.3g} of a run's log median; {c.between_run_note}",
        f"#{'case':<{w}} {'base(us)':>10} {'new(us)':>10} {'ratio':>7} {'CI low':>7} {'CI high':>7}"
        f" {'p_adj':>7} {'noise':>6} {'runs':>5}  verdict",
    ]
    for r in c.cases:
        if show == "changed" and r.verdict == "same":
            continue
        lines.append(
            f" {names[r.key][:w]:<{w}} {r.base_median_us:10.1f} {r.new_median_us:10.1f}"
            f" {r.ratio:7.3f} {_bound(r.ci_low)} {_bound(r.ci_high)} {r.p_adjusted:7.3g} {r.noise_sd:6.3f}"
            f" {runs_text(r.runs_needed):>5}  {r.verdict}"
        )
    lines.append(f"# {count_line(c)}  (noise: the case's between-run sd; runs: REPEAT that would resolve it)")
    if c.refused:
        lines.append(
            f"# not compared (settings differ): {', '.join(describe_key(k) for k in c.refused[:5])}"
            f"{' ...' if len(c.refused) > 5 else ''}"
        )
    if c.only_base or c.only_new:
        lines.append(f"# unmatched: {len(c.only_base)} only in base, {len(c.only_new)} only in new")
    if c.unusable:
        lines.append(
            f"# not compared (no positive median time in some run): "
            f"{', '.join(describe_key(k) for k in c.unusable[:5])}{' ...' if len(c.unusable) > 5 else ''}"
        )
    lines.append(
        f"# overall (median case ratio): {c.overall_ratio:.3f}  CI [{c.overall_ci[0]:.3f}, "
        f"{c.overall_ci[1]:.3f}]  -> {c.overall}"
    )
    if repeat_advice(c):
        lines.append(f"# {repeat_advice(c)}")
    lines.append(f"# {gate_line(c)}")
    return "\n".join(lines) + "\n"
