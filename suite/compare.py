"""Compare runs case by case: time ratios with confidence intervals and a CI gate.

Cases are matched across runs by their identity (``case_key``: every
non-measurement field of the record, e.g. experiment, op, variant, backend,
device, dtype, world_size, size_bytes, in_place, redop, root, src/dst, ...).
For each matched case, with base samples b and new samples x (``samples_us``,
the per-iteration cross-rank times):

- ratio r = median(x) / median(b)  (> 1: the new run is slower);
- a 95% percentile-bootstrap confidence interval of r (resampling b and x
  independently, fixed seed so reports are reproducible; Efron & Tibshirani,
  An Introduction to the Bootstrap, 1993, ch. 13);
- a two-sided Mann–Whitney U p-value (normal approximation with tie correction;
  Conover 1999 §5.1), Holm-adjusted over all cases of the comparison.

Verdict per case: *slower* when the CI lies above 1 + tolerance, *faster* when it
lies below 1 − tolerance, else *same*. The tolerance (default 5%) is the practical
margin below which a change does not matter. Overall: the geometric mean of the
case ratios, with a bootstrap CI from resampling every case at once, judged the
same way; it is what catches a small slowdown spread over many noisy cases.

Gate (exit status of ``python -m suite.report compare``): 1 if the overall verdict
is *slower*, or any case is *slower* with a Holm-adjusted p below alpha (so noisy
suites with many cases do not fail by chance); else 0. 2 on unreadable input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# Fields that are measurements (or bookkeeping), not part of what a case *is*.
MEASUREMENT_FIELDS = frozenset({
    "time_us", "p05_us", "p50_us", "p95_us", "p99_us", "min_us", "max_us", "mean_us", "algbw_gbps",
    "busbw_gbps", "busbw_factor", "n_wrong", "samples_us", "iterations", "warmup_iters", "ops_per_sample",
    "precision_reached", "hosts", "label",
})
# Suffixes of measured quantities that experiments add (ddp: samples_per_s, overlap_pct, ...).
_MEASURED_SUFFIXES = ("_us", "_ms", "_s", "_gbps", "_pct", "_per_s", "_frac", "_fraction", "_ratio", "memory_bytes",
                      "_peak_bytes")

DEFAULT_TOLERANCE = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_CONFIDENCE = 0.95
N_BOOT = 2000


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
    known = {"experiment", "variant", "op", "backend", "device", "dtype", "redop", "src", "dst", "size_bytes",
             "in_place", "function", "world_size", "timing_mode", "root", "count"}
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
    """Two-sided Mann–Whitney U p-value (unadjusted)."""
    p_adjusted: float = math.nan
    """Holm-adjusted p-value over the comparison's cases."""
    verdict: str = "same"


@dataclass(frozen=True, kw_only=True)
class Comparison:
    base_name: str
    new_name: str
    cases: list[CaseComparison]
    geomean_ratio: float
    geomean_ci: tuple[float, float]
    overall: str
    only_base: list[tuple] = field(default_factory=list)
    only_new: list[tuple] = field(default_factory=list)
    tolerance: float = DEFAULT_TOLERANCE
    alpha: float = DEFAULT_ALPHA

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


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann–Whitney U p-value, normal approximation with tie correction."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return math.nan
    allv = np.concatenate([a, b])
    order = np.argsort(allv, kind="mergesort")
    ranks = np.empty(len(allv))
    sorted_v = allv[order]
    i = 0
    ties = 0.0
    while i < len(sorted_v):  # average ranks over ties
        j = i
        while j + 1 < len(sorted_v) and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return 1.0
    z = (abs(u - mu) - 0.5) / math.sqrt(var)  # continuity correction
    z = max(z, 0.0)
    return float(math.erfc(z / math.sqrt(2.0)))


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


def compare_records(base: list[dict], new: list[dict], *, base_name: str = "base", new_name: str = "new",
                    tolerance: float = DEFAULT_TOLERANCE, alpha: float = DEFAULT_ALPHA,
                    confidence: float = DEFAULT_CONFIDENCE, n_boot: int = N_BOOT, seed: int = 0) -> Comparison:
    """Compare two runs' records (see the module docstring for the statistics)."""
    bmap = {case_key(r): r for r in base}
    nmap = {case_key(r): r for r in new}
    keys = [k for k in bmap if k in nmap]
    rng = np.random.default_rng(seed)
    lo_q, hi_q = 100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2
    rows = []
    log_boot = []
    for k in keys:
        b, x = _samples(bmap[k]), _samples(nmap[k])
        mb, mx = float(np.median(b)), float(np.median(x))
        if mb <= 0 or mx <= 0:
            continue
        boot = _boot_medians(rng, x, n_boot) / np.maximum(_boot_medians(rng, b, n_boot), 1e-300)
        lo, hi = np.percentile(boot, [lo_q, hi_q])
        log_boot.append(np.log(np.maximum(boot, 1e-300)))
        rows.append(CaseComparison(key=k, base_median_us=mb, new_median_us=mx, ratio=mx / mb, ci_low=float(lo),
                                   ci_high=float(hi), p_value=mann_whitney_p(b, x)))
    adj = holm([r.p_value for r in rows])
    cases = [CaseComparison(**{**r.__dict__, "p_adjusted": a, "verdict": verdict(r.ci_low, r.ci_high, tolerance)})
             for r, a in zip(rows, adj)]
    if cases:
        gm = math.exp(float(np.mean([math.log(c.ratio) for c in cases])))
        gboot = np.exp(np.mean(np.stack(log_boot), axis=0))
        glo, ghi = (float(v) for v in np.percentile(gboot, [lo_q, hi_q]))
        overall = verdict(glo, ghi, tolerance)
    else:
        gm, glo, ghi, overall = math.nan, math.nan, math.nan, "no common cases"
    return Comparison(base_name=base_name, new_name=new_name, cases=cases, geomean_ratio=gm, geomean_ci=(glo, ghi),
                      overall=overall, only_base=[k for k in bmap if k not in nmap],
                      only_new=[k for k in nmap if k not in bmap], tolerance=tolerance, alpha=alpha)


def format_comparison(c: Comparison, *, show: str = "all") -> str:
    """Text table of a comparison; ``show='changed'`` lists only cases not judged same."""
    names = {r.key: describe_key(r.key) for r in c.cases}
    w = min(90, max([len(n) for n in names.values()] + [4]))
    lines = [f"# compare: base={c.base_name}  new={c.new_name}  (ratio = new/base median time; >1 slower; "
             f"95% bootstrap CI; tolerance ±{c.tolerance:.0%}; Mann-Whitney p Holm-adjusted)",
             f"#{'case':<{w}} {'base(us)':>10} {'new(us)':>10} {'ratio':>7} {'CI low':>7} {'CI high':>7}"
             f" {'p_adj':>7}  verdict"]
    for r in c.cases:
        if show == "changed" and r.verdict == "same":
            continue
        mark = " *" if r in c.regressions else ""
        lines.append(f" {names[r.key][:w]:<{w}} {r.base_median_us:10.1f} {r.new_median_us:10.1f}"
                     f" {r.ratio:7.3f} {r.ci_low:7.3f} {r.ci_high:7.3f} {r.p_adjusted:7.3g}  {r.verdict}{mark}")
    n = {v: sum(1 for r in c.cases if r.verdict == v) for v in ("slower", "faster", "same")}
    lines.append(f"# {len(c.cases)} matched case(s): {n['slower']} slower, {n['faster']} faster, {n['same']} same;"
                 f" {len(c.regressions)} significant regression(s) (*)")
    if c.only_base or c.only_new:
        lines.append(f"# unmatched: {len(c.only_base)} only in base, {len(c.only_new)} only in new")
    lines.append(f"# overall (geometric mean ratio): {c.geomean_ratio:.3f}  CI [{c.geomean_ci[0]:.3f}, "
                 f"{c.geomean_ci[1]:.3f}]  -> {c.overall}")
    lines.append(f"# gate: {'FAIL (regression)' if c.failed else 'PASS'}")
    return "\n".join(lines) + "\n"
