"""Compare runs case by case: time ratios with confidence intervals and a CI gate.

Cases are matched across runs by their identity (``case_key``: the fields the case
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
- in log space, var(log r) = within + between: *within* is the bootstrap variance of
  log r from resampling every run's samples (fixed seed, so reports are reproducible;
  Efron & Tibshirani, An Introduction to the Bootstrap, 1993, ch. 13); *between* is
  σ²·(1/k_b + 1/k_n), σ the between-run sd of one run's log median, pooled over cases:
  - with two or more runs on a side, from each case's run medians about their side's mean;
  - **with one run per side** (the comparison says so) σ cannot be seen case by case. The
    interval is then widened by the spread of the comparison's own log ratios:
    σ = rms(log r_i − median_i log r_i) / √2 over the cases i (each log ratio is the
    difference of two runs' log medians), which assumes that most cases did not change.
    A change common to every case, or a machine uniformly slower during one of the two
    runs, is not in σ; it shows in the overall verdict, and only several runs per side
    (ideally interleaved A/B/A/B) can tell the two apart;
- the case's interval is log r ± z·sqrt(within + between) with z for the confidence
  level *simultaneously over the m cases* (Bonferroni, z at 1 − (1−confidence)/(2m)),
  so that two runs of one commit give "same" for every case with probability ≥ the level;
- a two-sided p-value of log r = 0 from the same variance, Holm-adjusted over the cases.

Verdict per case: *slower* when the interval lies above 1 + tolerance, *faster* when it
lies below 1 − tolerance, else *same*. The tolerance (default 5%) is the practical
margin below which a change does not matter. Overall: the median of the case ratios,
with a percentile interval (plain confidence level) from a bootstrap that resamples the
cases together with each case's within-run bootstrap, so the spread between cases (their
run-to-run variation) is in it; it is what catches a small slowdown spread over many noisy
cases. A median, not the geometric mean: on a shared machine a run has a few cases that a
burst of other load slowed 10x, and they drag a mean across the tolerance (two runs of one
commit: geometric mean 0.76, median 0.90). A shift common to all cases is not in the interval.

Gate (exit status of ``python -m suite.report compare``): 1 if the overall verdict
is *slower*, or any case is *slower* with a Holm-adjusted p below alpha (so noisy
suites with many cases do not fail by chance); else 0. 2 on unreadable input.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from suite import metrics

# Fields that are measurements (or bookkeeping), not part of what a case *is*.
MEASUREMENT_FIELDS = frozenset(
    {
        "time_us",
        "p05_us",
        "p50_us",
        "p95_us",
        "p99_us",
        "min_us",
        "max_us",
        "mean_us",
        "algbw_gbps",
        "busbw_gbps",
        "busbw_factor",
        "n_wrong",
        "samples_us",
        "iterations",
        "warmup_iters",
        "ops_per_sample",
        "precision_reached",
        "hosts",
        "label",
    }
)
# Suffixes of measured quantities that experiments add (ddp: samples_per_s, overlap_pct, ...).
_MEASURED_SUFFIXES = (
    "_us",
    "_ms",
    "_s",
    "_gbps",
    "_pct",
    "_per_s",
    "_frac",
    "_fraction",
    "_ratio",
    "memory_bytes",
    "_mem_bytes",
    "_peak_bytes",
)

DEFAULT_TOLERANCE = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_CONFIDENCE = 0.95
N_BOOT = 2000
_NORMAL = statistics.NormalDist()


COMMON_IDENTITY = ("experiment", "op", "backend", "device", "world_size", "timing_mode", "dtype", "size_bytes")
"""Identity fields every declared case has; a record's ``identity`` lists the case's own."""


def case_key(rec: dict) -> tuple:
    """The identity of a case, sorted by name.

    Records made by the harness name their identity fields (``identity``, declared by
    the case); for runs stored before that, the identity is guessed as the
    non-measurement scalar fields."""
    if isinstance(rec.get("identity"), list):
        names = set(COMMON_IDENTITY) | set(rec["identity"])
        return tuple(sorted(((k, rec.get(k)) for k in names if k in rec), key=lambda kv: kv[0]))
    items = []
    for k, v in rec.items():
        if k in MEASUREMENT_FIELDS or (k != "size_bytes" and k.endswith(_MEASURED_SUFFIXES)):
            continue
        if isinstance(v, float) or isinstance(v, (list, dict)):
            continue
        items.append((k, v))
    return tuple(sorted(items, key=lambda kv: kv[0]))


def describe_key(key: tuple) -> str:
    d = dict(key)
    parts = [str(d.get("experiment", "")), str(d.get("variant") or d.get("op", ""))]
    for k in ("backend", "device", "dtype", "redop"):
        if d.get(k) not in (None, "", "none"):
            parts.append(str(d[k]))
    if "src" in d and "dst" in d:
        parts.append(f"{d['src']}->{d['dst']}")
    if d.get("size_bytes") is not None:
        parts.append(f"{d['size_bytes']}B")
    if "in_place" in d:
        parts.append("inplace" if d["in_place"] else "oop")
    known = {
        "experiment",
        "variant",
        "op",
        "backend",
        "device",
        "dtype",
        "redop",
        "src",
        "dst",
        "size_bytes",
        "in_place",
        "function",
        "world_size",
        "timing_mode",
        "root",
        "count",
    }
    extra = [f"{k}={v}" for k, v in key if k not in known]
    return "-".join(p for p in parts if p) + (" " + " ".join(extra) if extra else "")


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
    """Two-sided p-value of log ratio = 0 (normal, with the within- and between-run variance; unadjusted)."""
    p_adjusted: float = math.nan
    """Holm-adjusted p-value over the comparison's cases."""
    verdict: str = "same"
    base_runs: int = 1
    """How many runs of the base side have this case."""
    new_runs: int = 1


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
    tolerance: float = DEFAULT_TOLERANCE
    alpha: float = DEFAULT_ALPHA
    confidence: float = DEFAULT_CONFIDENCE
    base_runs: int = 1
    new_runs: int = 1
    between_run_sd: float = 0.0
    """Between-run sd of one run's log median, pooled over cases (see ``_between_run_sd``)."""
    between_run_note: str = ""
    """How ``between_run_sd`` was obtained (several runs per side, or the one-run-each rule)."""

    @property
    def regressions(self) -> list[CaseComparison]:
        """Cases that are slower both beyond the tolerance and after Holm adjustment."""
        return [c for c in self.cases if c.verdict == "slower" and c.p_adjusted < self.alpha]

    @property
    def failed(self) -> bool:
        return self.overall == "slower" or bool(self.regressions)


def verdict(ci_low: float, ci_high: float, tolerance: float) -> str:
    if ci_low > 1.0 + tolerance:
        return "slower"
    if ci_high < 1.0 - tolerance:
        return "faster"
    return "same"


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
    per_run = np.stack([_boot_medians(rng, x, n_boot) for x in runs], axis=1)  # n_boot x k
    return np.log(np.maximum(np.median(per_run, axis=1), 1e-300))


def _between_run_sd(base_logs: list[np.ndarray], new_logs: list[np.ndarray], diffs: np.ndarray) -> tuple[float, str]:
    """The between-run sd of one run's log median, pooled over cases, and how it was obtained.

    With two or more runs on a side, from the spread of each case's run medians about their side's
    mean, pooled over cases and sides (one variance, many degrees of freedom). With one run on each
    side it cannot be seen case by case; then from the comparison itself: the spread of the cases'
    log ratios about their median, / sqrt(2) (each log ratio is the difference of two runs' log
    medians). That assumes most cases did not change; a change common to every case (or a machine
    that was uniformly slower during one run) is not in it (see the module docstring)."""
    ss, df = 0.0, 0
    for logs in (*base_logs, *new_logs):
        if len(logs) > 1:
            ss += float(np.sum((logs - logs.mean()) ** 2))
            df += len(logs) - 1
    if df > 0:
        return math.sqrt(ss / df), f"between-run sd from the runs' medians ({df} degrees of freedom)"
    if len(diffs) < 2:
        return 0.0, "one run per side and a single case: between-run variation unknown, not included"
    dev = diffs - np.median(diffs)
    return float(
        np.sqrt(np.mean(dev**2)) / math.sqrt(2.0)
    ), "one run per side: between-run sd estimated from the spread of the cases' ratios"


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


def _runs_of(runs: Sequence[Sequence[dict]]) -> dict:
    """case key -> the case's record in each run that has it (runs in order)."""
    out: dict = {}
    for recs in runs:
        for r in recs:
            out.setdefault(case_key(r), []).append(r)
    return out


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
    confidence: float = DEFAULT_CONFIDENCE,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> "Comparison":
    """Compare the runs of two sides (each a list of runs' records); see the module docstring."""
    bmap, nmap = _runs_of(base_runs), _runs_of(new_runs)
    keys = [k for k in bmap if k in nmap]
    rng = np.random.default_rng(seed)
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
    d = np.asarray([math.log(p[2] / p[1]) for p in pts])
    sd_b, between_note = _between_run_sd([p[3] for p in pts], [p[4] for p in pts], d)
    m = len(pts)
    kb, kn = len(base_runs), len(new_runs)
    # per-case intervals hold for all m cases together (Bonferroni), so that two runs of one commit
    # give "same" for every case with probability >= the confidence level
    z_case = metrics.z_two_sided(1 - (1 - confidence) / max(m, 1))
    rows, log_boot = [], []
    for (k, mb, mx, lb, lx, boot), di in zip(pts, d):
        # within-run bootstrap + between-run sd^2/k per side: conservative (the between-run estimate
        # already holds within-run noise); sd^2/k is a mean's variance, a median of k <= 2 runs is one
        se = math.sqrt(float(np.var(boot)) + sd_b**2 * (1.0 / len(lb) + 1.0 / len(lx)))
        p = float(2 * (1 - _NORMAL.cdf(abs(di) / se))) if se > 0 else (1.0 if di == 0 else 0.0)
        rows.append(
            CaseComparison(
                key=k,
                base_median_us=mb,
                new_median_us=mx,
                ratio=mx / mb,
                ci_low=math.exp(di - z_case * se),
                ci_high=math.exp(di + z_case * se),
                p_value=p,
                base_runs=len(bmap[k]),
                new_runs=len(nmap[k]),
            )
        )
        log_boot.append(boot)
    adj = holm([r.p_value for r in rows])
    cases = [
        dataclasses.replace(r, p_adjusted=a, verdict=verdict(r.ci_low, r.ci_high, tolerance)) for r, a in zip(rows, adj)
    ]
    if cases:
        # overall: the median case ratio, with a bootstrap that resamples the cases (and, per case,
        # its within-run bootstrap): the spread between cases carries their run-to-run variation,
        # and a median is not dragged by the few cases a busy machine slowed by 10x in one run
        boot_cases = np.stack(log_boot)  # m x n_boot
        if kb > 1 or kn > 1:  # whole runs resampled too: a run that was slower as a whole is in the interval
            boot_cases = boot_cases + _run_shift_boot(rng, [p[3] for p in pts], [p[4] for p in pts], kb, kn, n_boot)
        pick = rng.integers(0, m, size=(n_boot, m))
        gboot = np.median(boot_cases[pick, np.arange(n_boot)[:, None]], axis=1)
        glo, ghi = (math.exp(float(v)) for v in np.percentile(gboot, [50 * (1 - confidence), 50 * (1 + confidence)]))
        gm = math.exp(float(np.median(d)))
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
        tolerance=tolerance,
        alpha=alpha,
        base_runs=kb,
        new_runs=kn,
        between_run_sd=sd_b,
        between_run_note=between_note,
        confidence=confidence,
    )


def format_comparison(c: Comparison, *, show: str = "all") -> str:
    """Text table of a comparison; ``show='changed'`` lists only cases not judged same."""
    names = {r.key: describe_key(r.key) for r in c.cases}
    w = min(90, max([len(n) for n in names.values()] + [4]))
    lines = [
        f"# compare: base={c.base_name} ({c.base_runs} run(s))  new={c.new_name} ({c.new_runs} run(s))  "
        f"(ratio = new/base median of run medians; >1 slower; CI {c.confidence:.0%} simultaneous over the cases; "
        f"tolerance ±{c.tolerance:.0%}; p Holm-adjusted)",
        f"# between-run variation: sd {c.between_run_sd:.3g} of a run's log median; {c.between_run_note}",
        f"#{'case':<{w}} {'base(us)':>10} {'new(us)':>10} {'ratio':>7} {'CI low':>7} {'CI high':>7}"
        f" {'p_adj':>7}  verdict",
    ]
    for r in c.cases:
        if show == "changed" and r.verdict == "same":
            continue
        mark = " *" if r in c.regressions else ""
        lines.append(
            f" {names[r.key][:w]:<{w}} {r.base_median_us:10.1f} {r.new_median_us:10.1f}"
            f" {r.ratio:7.3f} {r.ci_low:7.3f} {r.ci_high:7.3f} {r.p_adjusted:7.3g}  {r.verdict}{mark}"
        )
    n = {v: sum(1 for r in c.cases if r.verdict == v) for v in ("slower", "faster", "same")}
    lines.append(
        f"# {len(c.cases)} matched case(s): {n['slower']} slower, {n['faster']} faster, {n['same']} same;"
        f" {len(c.regressions)} significant regression(s) (*)"
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
    lines.append(f"# gate: {'FAIL (regression)' if c.failed else 'PASS'}")
    return "\n".join(lines) + "\n"
