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
    ``suite.report.compare.shrinkage``): a case with few runs is pulled toward the pooled value, and little
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

What the runs can detect: a case's interval is log r ± q·se with q and se independent of r, so it is
called *slower* exactly when its measured ratio exceeds (1 + tolerance)·exp(q·se), and *faster* below
(1 − tolerance)·exp(−q·se) (``detect_slower``/``detect_faster``); the overall interval shifts with a
change common to every case, so that is caught beyond (1 + tolerance)·ratio / CI low. The text states
these for half the cases and for all (``compare_text.detect_line``), so a comparison that cannot tell
still says which changes it would have caught; a true change at such a bound is caught about half the
time (its measurement scatters about it). Both sides holding the same samples (a run compared with
itself, in any order of its runs) is *identical*: every ratio is exactly 1 with nothing to estimate, so
every case and the overall ratio are *same* and the gate passes.

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

import math
from collections.abc import Sequence

import numpy as np

from suite import results
from suite.report.compare.case_identity import records_by_case
from suite.report.compare.case_settings import settings_differences
from suite.report.compare.stats import (
    N_BOOT,
    case_noise,
    collect_cases,
    identical_sides,
    judge_cases,
    overall_interval,
)
from suite.report.compare.text import format_comparison
from suite.report.compare.verdicts import (
    DEFAULT_ALPHA,
    DEFAULT_MAX_INCONCLUSIVE,
    DEFAULT_TOLERANCE,
    Comparison,
    verdict,
)

__all__ = [
    "Comparison",
    "compare_records",
    "compare_runs",
    "format_comparison",
    "gated_records",
]
"""The comparison's public face: the entry point and its result, and the text ``make compare`` prints."""


def _timed(runs: Sequence[Sequence[dict]]) -> list[list[dict]]:
    """Each run's records but the oversubscribed pass's (suite.results.communication_records): the gate does not
    judge times that measure CPU contention; nor the link probe's steps beyond the sweep (``beyond_sweep``:
    suite/ops/p2p/link_probe.py), whose count is the noise's to decide (it stops where the rate levels off), so
    that two runs of one commit still match case for case."""
    return [gated_records(r) for r in runs]


def gated_records(recs: Sequence[dict]) -> list[dict]:
    """The records of one run that the gate compares (``_timed``)."""
    return [x for x in results.communication_records(list(recs)) if not x.get("beyond_sweep")]


def compare_records(base: list[dict], new: list[dict], **kw) -> "Comparison":
    """Compare one run's records with another's (``compare_runs`` with one run per side)."""
    return compare_runs([base], [new], **kw)


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
    bmap, nmap = records_by_case(_timed(base_runs)), records_by_case(_timed(new_runs))
    keys = [k for k in bmap if k in nmap]
    diffs, affected = settings_differences(base_settings, new_settings, bmap, nmap, keys)
    refused = [] if allow_settings_diff else [k for k in keys if k in affected]
    rng = np.random.default_rng(seed)
    pts, unusable = collect_cases(bmap, nmap, [k for k in keys if k not in refused], rng, n_boot)
    identical = identical_sides(bmap, nmap, [p[0] for p in pts])
    d = np.asarray([math.log(p[2] / p[1]) for p in pts])
    noise, sd0, d0, note = case_noise([p[3] for p in pts], [p[4] for p in pts], d)
    if identical:
        sd0, d0, note = 0.0, math.inf, "none: both sides hold the same samples (identical runs)"
    cases = judge_cases(pts, noise, d0, alpha, tolerance, identical)
    kb, kn = len(base_runs), len(new_runs)
    if identical:
        gm, glo, ghi = 1.0, 1.0, 1.0
    elif cases:
        gm, (glo, ghi) = overall_interval(pts, kb, kn, rng, n_boot, 1 - alpha)
    else:
        gm, glo, ghi = math.nan, math.nan, math.nan
    overall = verdict(glo, ghi, tolerance) if cases else "no common cases"
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
        overall_detect=((1 - tolerance) * gm / ghi, (1 + tolerance) * gm / glo) if cases else (0.0, math.inf),
        identical=identical,
        oversubscribed=len(
            records_by_case([[x for x in r if results.oversubscribed(x)] for r in (*base_runs, *new_runs)])
        ),
    )
