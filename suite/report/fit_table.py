"""The fit table of a report: the α, β, R² cells of a fitted line, one row per line of each series' model
that holds, one line per reason for the series no line describes, and the note that says how to read it."""

from __future__ import annotations

import math

from suite.metrics import format_number
from suite.report.analysis import Report


def _interval(v: float, ci, fmt: str) -> str:
    """``v [lo, hi]``; an infinite end (a resample with no bandwidth term) reads "unbounded"."""

    def f(x):
        return "unbounded" if math.isinf(x) else format_number(x, fmt)

    return f(v) + ("" if ci is None else f" [{f(ci[0])}, {f(ci[1])}]")


def fit_cells(p) -> list[str]:
    """The α, β and R² cells of one fitted line (a suite.fit.AlphaBeta): numbers only where the line
    could have failed and did not. Fewer than suite.fit.MIN_FIT_SIZES sizes: "too few sizes" (a line
    through two passes exactly); R² below MIN_R2 and off by more than MAX_RMS_REL: "model does not
    fit"; no bandwidth term (time flat in size): no β, and the rms error where R² has no meaning."""
    from suite.model.fit import MIN_FIT_SIZES, MIN_R2

    if not p.testable:
        return ["-", "-", f"too few sizes ({p.n_sizes}; a line needs {MIN_FIT_SIZES} to be tested)"]
    if not p.holds:
        return ["-", "-", f"model does not fit (R² < {MIN_R2})"]
    beta = "- (time flat in size)" if p.latency_only else _interval(p.beta_gbps, p.beta_ci_gbps, ".4g")
    r2 = f"{p.r2:z.3f}" if p.r2 >= MIN_R2 else f"- (flat: within {p.rms_rel_err:z.1%} rms)"
    return [_interval(p.alpha_us, p.alpha_ci_us, ".1f"), beta, r2]


def fit_table_rows(rep: Report) -> tuple[list[str], list[list[str]]]:
    """One row per line of each series' model that holds (two around a knee), cells as ``fit_cells``; the
    series no line describes are ``fit_misses``' lines, not rows."""
    from suite.metrics import format_size

    head = [
        "experiment",
        "series",
        "backend",
        "ranks",
        "sizes",
        "α (µs) [95% CI]",
        "β (GB/s) [95% CI]",
        "R²",
        "points",
        "link β = busbw∞ (GB/s)",
        "measured / ring at max size",
    ]
    if rep.link_rate:
        head.append(f"link β / LINK_RATE ({rep.link_rate[0]})")
    rows = []
    for f in rep.fits:
        if not f.fit.holds:
            continue
        pw = f.fit.piecewise
        pieces = (
            [("all", f.fit.single)]
            if pw is None
            else [
                (f"< {format_size(int(pw.knee_bytes))} (knee)", pw.below),
                (f">= {format_size(int(pw.knee_bytes))}", pw.above),
            ]
        )
        for i, (sizes, p) in enumerate(pieces):
            last = i == len(pieces) - 1
            nums = fit_cells(p)
            row = [
                f.experiment,
                f.series,
                f"{f.backend}/{f.device}",
                str(f.world_size),
                sizes,
                *nums,
                str(p.n_points),
                "-" if f.link_beta_gbps is None or not last or not p.holds else f"{f.link_beta_gbps:z.4g}",
                "-" if f.ring_ratio is None or not last else f"{f.ring_ratio:z.2f}",
            ]
            if rep.link_rate:
                row.append("-" if f.rate_ratio is None or not last or not p.holds else f"{f.rate_ratio:z.2f}")
            rows.append(row)
    return head, rows


def fit_misses(rep: Report) -> list[str]:
    """One line per reason a series has no α–β line (none fits; too few sizes to test one), naming the series
    by experiment, instead of a row each."""
    from suite.model.fit import MAX_RMS_REL, MIN_FIT_SIZES, MIN_R2

    worlds = len({f.world_size for f in rep.fits}) > 1
    out = []
    for why, misses in (
        (
            f"no size range fits α–β (R² < {MIN_R2}, off by more than {MAX_RMS_REL:z.0%} rms): latency-bound or noisy, "
            "see the tables",
            [f for f in rep.fits if f.fit.testable and not f.fit.holds],
        ),
        (
            f"too few sizes to test a line (it needs {MIN_FIT_SIZES})",
            [f for f in rep.fits if not f.fit.testable],
        ),
    ):
        by_exp: dict = {}
        for f in misses:
            by_exp.setdefault(f.experiment, []).append(f.series + (f" ({f.world_size} ranks)" if worlds else ""))
        if by_exp:
            named = "; ".join(f"{exp}: {', '.join(names)}" for exp, names in by_exp.items())
            out.append(f"{len(misses)} series, {why}: {named}")
    return out


FIT_NOTE = (
    "α–β fit: time(S) = α + S/β per series, weighted least squares on relative error; R² of log(time); "
    "[95% CI] from a bootstrap over the sizes (fixed seed). Where the protocol changes with size the series "
    "is fitted as two lines around a knee, kept only if that cuts the weighted squared error to a fifth and one line "
    "misses by more than 3% rms; a line with R² below 0.8 says 'model does not fit', and a line of fewer than "
    "3 sizes says 'too few sizes' (through two sizes any line passes exactly: R² = 1 by construction). "
    "A series whose time does not grow with size has no β ('time flat in size'). "
    "Ring model: time = a(n)·α_link + f(n)·S/β_link with a(n) latency steps and f(n) the busbw factor "
    "(all_reduce 2(n−1), 2(n−1)/n; all_gather/reduce_scatter/all_to_all (n−1), (n−1)/n; broadcast/reduce "
    "(n−1), 1). 'link β' is the large-size β times f(n), i.e. the asymptotic busbw; "
    "'measured / ring' > 1 means the op is slower than a ring over the reference link would be."
)
