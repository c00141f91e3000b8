"""The figures that answer a question at a glance (matplotlib, Agg, like suite/report/plots.py): lines
against message size under labelled ceilings (the headline figure: every collective's busbw against the
link's rate; copy rates against the memory and PCIe peaks; one backend's time over another's against 1),
and stacked bars of where a step's time goes, with a panel of one more number per bar beside them (the
bytes each strategy moves per step against DDP's). Each returns PNG bytes (or a deferred placeholder,
plots.deferred)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from suite.report.plots import figure_png, size_axis

CEILING_STYLES = (("black", "-."), ("0.45", "--"), ("tab:red", ":"))
"""How the ceilings of one figure are told apart: (colour, line style), in turn."""


def size_lines(
    title: str,
    lines: Sequence[tuple[str, Sequence[float], Sequence[float]]],
    *,
    ylabel: str,
    ceilings: Sequence[tuple[float, str]] = (),
    logy: bool = True,
) -> bytes:
    """One line per (label, sizes in bytes, values) against message size (log2 axis), and each of
    ``ceilings`` (value, label) drawn across the whole width with its label written on it."""
    fig = Figure(figsize=(8.4, 4.4))
    ax = fig.subplots()
    ax.set_title(title, fontsize=10)
    for k, (label, xs, ys) in enumerate(lines):
        ax.plot(xs, ys, "o-", color=f"C{k % 10}", label=label, ms=3.5, lw=1.4)
    for (value, label), (color, style) in zip(ceilings, CEILING_STYLES * len(ceilings)):
        ax.axhline(value, color=color, ls=style, lw=1.4)
        ax.annotate(
            label, (0.01, value), xycoords=("axes fraction", "data"), xytext=(0, 3), textcoords="offset points",
            fontsize=8, color=color,
        )  # fmt: skip
    size_axis(ax)
    if logy:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    if lines:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.subplots_adjust(left=0.09, right=0.78, top=0.91, bottom=0.12)
    return figure_png(fig)


def stacked_bar_plot(
    title: str,
    labels: Sequence[str],
    segments: Sequence[tuple[str, Sequence[float | None], str]],
    *,
    xlabel: str,
    marks: tuple[str, Sequence[float | None]] | None = None,
    beside: tuple[str, Sequence[float | None]] | None = None,
) -> bytes:
    """One horizontal bar per label, its ``segments`` (name, values, hatch: "" solid) stacked left to right
    in that order; ``marks`` (name, values): a black tick on each bar (e.g. the measured total); ``beside``
    (name, ratios): a narrower panel on the right with one bar per label, its value written on it and a
    line at 1 (e.g. bytes per step against the reference's)."""
    n = len(labels)
    fig = Figure(figsize=(9.0 + (3.4 if beside else 0.0), max(3.0, 0.42 * n + 2.0)), layout="tight")
    if beside is None:
        ax = fig.subplots()
        ax.set_title(title, fontsize=11)
    else:
        ax, bx = fig.subplots(1, 2, width_ratios=[3, 1], sharey=True)
        fig.suptitle(title, fontsize=11)
    y = np.arange(n)
    left = np.zeros(n)
    for k, (name, values, hatch) in enumerate(segments):
        v = _values(values)
        ax.barh(y, v, left=left, color=f"C{k}", alpha=0.85, hatch=hatch or None, edgecolor="0.2", lw=0.4, label=name)
        left += v
    if marks is not None:
        name, values = marks
        pts = [(x, yi) for x, yi in zip(values, y) if x is not None]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker="|", s=400, color="black", label=name, zorder=3)
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)
    if beside is not None:
        name, values = beside
        bx.barh(y, _values(values), color="0.6")
        bx.axvline(1.0, color="black", lw=0.9)
        for yi, x in zip(y, values):
            if x is not None:
                bx.text(x, yi, f" {x:z.2f}x", va="center", fontsize=8)
        bx.set_xlabel(name, fontsize=8)
        bx.grid(True, axis="x", alpha=0.3)
        bx.margins(x=0.25)
    return figure_png(fig)


def _values(values: Sequence[float | None]) -> np.ndarray:
    return np.nan_to_num(np.array([np.nan if x is None else float(x) for x in values]))
