"""A comparison's result and what it decides: the four verdicts of an interval, each case's row
(``CaseComparison``), the whole comparison (``Comparison``) and its CI gate (PASS / INCONCLUSIVE / FAIL,
the exit status of ``python -m suite.report compare``). How the intervals are obtained: ``suite.report.compare``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

DEFAULT_TOLERANCE = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_MAX_INCONCLUSIVE = 0.1
"""The gate does not PASS when more than this fraction of the cases could not be judged."""
VERDICTS = ("slower", "faster", "same", "inconclusive")
VERDICT_COLORS = {"slower": "tab:red", "faster": "tab:green", "same": "0.45", "inconclusive": "tab:orange"}
"""How every figure of a comparison draws each verdict (matplotlib colours)."""


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
    """Inconclusive cases: the runs per side that would resolve it; ``compare_stats.MAX_RUNS`` + 1 stands for more."""
    detect_slower: float = math.inf
    """The measured ratio beyond which this case, at its noise, is called slower: (1 + tolerance)·exp(q·se)."""
    detect_faster: float = 0.0
    """The measured ratio below which it is called faster: (1 − tolerance)·exp(−q·se)."""


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
    overall_detect: tuple[float, float] = (0.0, math.inf)
    """The overall ratio below / beyond which a change common to every case is called faster / slower (the
    interval shifts with such a change: (1 − tolerance)·ratio / CI high, (1 + tolerance)·ratio / CI low)."""
    identical: bool = False
    oversubscribed: int = 0
    """Cases of the oversubscribed pass in either side (suite.results.oversubscribed): left out of the gate, said."""
    """Both sides hold the same samples (a run compared with itself): every case same, nothing to estimate."""

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
