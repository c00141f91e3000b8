"""Predicted against measured (matplotlib, Agg, like suite/report/plots.py): one point per predicted time, on
log axes of the same range, the line where they agree and the band of the error the model aims at around it;
a point the target holds to is filled (a bandwidth-bound size, a training step), one it does not is hollow
(a latency-bound size). ``prediction_figure`` returns the Figure, so a test can read what it drew (each
series carries a gid); ``prediction_png`` its PNG bytes (or a deferred placeholder, plots.deferred)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from suite.metrics import format_time_us
from suite.report.plots import figure_png


@dataclass(frozen=True)
class Series:
    label: str
    measured_us: Sequence[float]
    predicted_us: Sequence[float]
    held: Sequence[bool]
    """Per point: the target holds to it (filled: a bandwidth-bound size, a training step) or not (hollow)."""
    marker: str = "o"


def prediction_figure(title: str, series: Sequence[Series], band: float) -> Figure:
    """Every series' predicted time against its measured one; y = x, and the band ±``band`` around it."""
    fig = Figure(figsize=(9.0, 5.6), layout="constrained")
    ax = fig.subplots()
    ax.set_title(title, fontsize=10)
    values = [v for s in series for v in (*s.measured_us, *s.predicted_us) if v and v > 0]
    lo, hi = (min(values) / 1.6, max(values) * 1.6) if values else (1.0, 10.0)
    xs = np.geomspace(lo, hi, 64)
    ax.fill_between(xs, xs * (1 - band), xs * (1 + band), color="0.85", lw=0, gid="band",
                    label=f"±{100 * band:z.0f}%: the error the model aims at")  # fmt: skip
    ax.plot(xs, xs, color="0.3", lw=0.9, label="predicted = measured")
    for k, s in enumerate(series):
        color = f"C{k % 10}"
        held = np.asarray(s.held, dtype=bool)
        m, p = np.asarray(s.measured_us, dtype=float), np.asarray(s.predicted_us, dtype=float)
        ax.scatter(m[held], p[held], s=30, marker=s.marker, color=color, gid=f"held:{s.label}",
                   label=s.label if held.any() else None)  # fmt: skip
        ax.scatter(m[~held], p[~held], s=30, marker=s.marker, facecolors="none", edgecolors=color,
                   label=None if held.any() else s.label, gid=f"loose:{s.label}")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), aspect="equal")
    for axis in (ax.xaxis, ax.yaxis):  # after the scale: setting one resets them
        axis.set_major_formatter(FuncFormatter(lambda v, _: format_time_us(v)))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("measured time")
    ax.set_ylabel("predicted time")
    ax.grid(True, which="major", alpha=0.3)
    key = "filled: bandwidth-bound, held to the band\nhollow: latency-bound; squares: steps"
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, title=key, title_fontsize=7)
    return fig


def prediction_png(title: str, series: Sequence[Series], band: float) -> bytes:
    return figure_png(prediction_figure(title, series, band))
