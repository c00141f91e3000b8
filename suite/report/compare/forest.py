"""The comparison page's first picture: a forest plot. Each case is a row, its new/base time ratio a dot
and its simultaneous interval a bar (``suite.report.compare``), coloured by its verdict; the grey band is
1 ± tolerance, the ratio axis is logarithmic and symmetric about 1, labelled above the rows as well as below
them (a tall forest still shows its scale on the first screen), and the overall (median case) ratio
is the diamond on top. A comparison of many cases draws every case that is not *same* (slower, then
faster, then the inconclusive ones furthest from 1) up to ``MAX_ROWS``, and a sample of the *same* ones
spread over their ratios; the caption says how many are not drawn.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import ScaledTranslation
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from suite.report.compare.case_identity import describe_key
from suite.report.compare.verdicts import VERDICT_COLORS, VERDICTS, CaseComparison, Comparison

MAX_ROWS = 40
"""At most this many cases are drawn (the figure stays inside a 1400x1800 browser window's first screen)."""
SAME_SAMPLE = 8
"""Of the cases judged *same*, at most this many are drawn, spread over their ratios."""
LABEL_CHARS = 70
ORDER = ("slower", "faster", "inconclusive", "same")
"""Top to bottom: what a person acts on first."""
TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 0.8, 0.9, 1.0, 1.1, 1.25, 2.0, 4.0, 5.0, 10.0, 20.0, 50.0, 100.0)


@dataclass(frozen=True)
class Forest:
    rows: list[CaseComparison]
    """The cases drawn, top to bottom: slower, faster, inconclusive, same; each by ratio, largest first."""
    not_drawn: dict[str, int]
    """Verdict -> how many cases of it are not drawn (only verdicts with some)."""


def _spread(cases: list[CaseComparison], k: int) -> list[CaseComparison]:
    """``k`` of ``cases`` evenly spaced over their ratios (the smallest and the largest included)."""
    if len(cases) <= k:
        return list(cases)
    ranked = sorted(cases, key=lambda r: r.ratio)
    return [ranked[int(i)] for i in np.round(np.linspace(0, len(ranked) - 1, k))]


def select(cases: Sequence[CaseComparison], max_rows: int = MAX_ROWS, same_sample: int = SAME_SAMPLE) -> Forest:
    """The rows of the forest: every case not judged same, up to ``max_rows`` less the same ones' sample
    (slower, then faster, then the inconclusive ones furthest from 1, narrowest interval first), and up to
    ``same_sample`` of the same ones, spread over their ratios."""
    by = {v: [r for r in cases if r.verdict == v] for v in VERDICTS}
    same = _spread(by["same"], min(same_sample, max_rows))
    budget = max_rows - len(same)
    far_first = sorted(by["inconclusive"], key=lambda r: (-abs(math.log(r.ratio)), r.ci_high / max(r.ci_low, 1e-300)))
    changed = (sorted(by["slower"], key=lambda r: -r.ratio) + sorted(by["faster"], key=lambda r: r.ratio) + far_first)[
        :budget
    ]
    drawn = changed + same
    ids = {id(r) for r in drawn}
    left = Counter(r.verdict for r in cases if id(r) not in ids)
    rows = sorted(drawn, key=lambda r: (ORDER.index(r.verdict), -r.ratio))
    return Forest(rows=rows, not_drawn={v: left[v] for v in ORDER if left[v]})


def _pct(x: float) -> str:
    return f"{x * 100:z.3g}%"


def caption(c: Comparison, forest: Forest) -> str:
    """One line: how many cases are slower beyond the tolerance (and faster, inconclusive), the overall
    ratio and verdict, and how many cases the figure leaves out."""
    n = Counter(r.verdict for r in c.cases)
    total = len(c.cases)
    text = (
        f"{n['slower']} of {total} cases slower beyond the {_pct(c.tolerance)} tolerance, {n['faster']} faster, "
        f"{n['inconclusive']} inconclusive, {n['same']} same"
    )
    if c.refused:
        text += f", {len(c.refused)} not compared (settings differ)"
    if c.cases:
        lo, hi = c.overall_ci
        text += f"; overall (median case ratio) {c.overall_ratio:z.3f} [{lo:z.3f}, {hi:z.3f}]: {c.overall}"
    hidden = sum(forest.not_drawn.values())
    if hidden:
        what = ", ".join(f"{k} {v}" + " nearest 1" * (v == "inconclusive") for v, k in forest.not_drawn.items())
        text += f". Not drawn: {hidden} of {total} ({what})"
    return text


def _limit(c: Comparison, rows: Sequence[CaseComparison]) -> float:
    """R of the ratio axis [1/R, R]: every drawn ratio and most of the intervals, at most 1.5x the
    furthest ratio (or 4x) so that one interval that cannot tell does not squeeze the rest."""
    pts = [r.ratio for r in rows] + ([c.overall_ratio] if rows else [])
    far = max([max(x, 1 / x) for x in pts if x > 0] + [1.0])
    reach = max([max(r.ci_high, 1 / r.ci_low) for r in rows if r.ci_low > 0] + [1.0])
    return min(max(reach, far * 1.2, (1 + c.tolerance) * 1.5), max(far * 1.5, 4.0))


def _row(ax, y: float, ratio: float, lo: float, hi: float, color: str, gid: str, lim: float, marker: str) -> None:
    """One row: the interval's bar (clipped to the axis, an arrow where it goes on) and the ratio's marker."""
    ax.plot([max(lo, 1 / lim), min(hi, lim)], [y, y], color=color, lw=1.6, solid_capstyle="butt", gid=f"{gid}/ci")
    for edge, beyond, arrow in ((lim**-0.98, lo < 1 / lim, "<"), (lim**0.98, hi > lim, ">")):
        if beyond:
            ax.plot([edge], [y], arrow, color=color, ms=6)
    ax.plot([ratio], [y], marker, color=color, ms=6 if marker == "D" else 4, gid=gid, zorder=3)


def forest_figure(c: Comparison, forest: Forest) -> Figure:
    """The forest plot of ``forest``'s rows, the overall ratio on top. Each row's marker has the gid
    ``case:<describe_key>`` (the overall one: ``overall``), its interval's bar that gid + ``/ci``."""
    rows = forest.rows
    n = len(rows) + 1
    fig = Figure(figsize=(11.0, 1.6 + 0.19 * n), layout="constrained")
    ax = fig.subplots()
    lim = _limit(c, rows)
    ax.axvspan(1 - c.tolerance, 1 + c.tolerance, color="0.85", alpha=0.7, lw=0)
    ax.axvline(1.0, color="0.3", lw=0.8)
    labels = ["overall (median case ratio)"]
    if c.cases:
        lo, hi = c.overall_ci
        _row(ax, 0, c.overall_ratio, lo, hi, VERDICT_COLORS.get(c.overall, "0.2"), "overall", lim, "D")
    for y, r in enumerate(rows, start=1):
        name = describe_key(r.key)
        labels.append(name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…")
        _row(ax, y, r.ratio, r.ci_low, r.ci_high, VERDICT_COLORS[r.verdict], f"case:{name}", lim, "o")
    ax.set_yticks(range(n), labels, fontsize=7)
    ax.set_ylim(n - 0.5, -0.7)
    ax.set_xscale("log")
    ax.set_xlim(1 / lim, lim)
    ticks = [t for t in TICKS if 1 / lim <= t <= lim]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:zg}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", labelsize=8, top=True, labeltop=True)  # the ratio axis on the first screen too
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_xlabel("new / base time (log scale; > 1: the new run is slower)", fontsize=9)
    counts = Counter(r.verdict for r in c.cases)
    handles = [Line2D([], [], marker="o", ls="-", color=VERDICT_COLORS[v], label=f"{v} ({counts[v]})") for v in ORDER]
    handles.append(Patch(color="0.85", label=f"±{_pct(c.tolerance)} tolerance"))
    above_ticks = ax.transAxes + ScaledTranslation(0, 0.2, fig.dpi_scale_trans)  # over the top tick labels
    ax.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        bbox_transform=above_ticks,
        ncol=5,
        fontsize=8,
        frameon=False,
    )
    shown = f"{len(rows)} of {len(c.cases)} cases" if len(rows) < len(c.cases) else f"{len(rows)} cases"
    fig.suptitle(
        f"{c.new_name[-40:]} vs {c.base_name[-40:]}: new/base time, {100 - c.alpha * 100:z.10g}% simultaneous "
        f"interval ({shown})",
        fontsize=10,
    )
    return fig
