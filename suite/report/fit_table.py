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
    """The α, β and R² cells of one fitted line (a suite.model.fit.AlphaBeta): numbers only where the line
    earns a model (``no_model``: enough sizes, R² or rms within bounds, intervals of bounded width), else
    "no model: <reason>"; no bandwidth term (time flat in size): no β, and the rms error where R² has no
    meaning."""
    from suite.model.fit import MIN_R2

    why = p.no_model()
    if why:
        return ["-", "-", f"no model: {why}"]
    beta = "- (time flat in size)" if p.flat else _interval(p.beta_gbps, p.beta_ci_gbps, ".4g")
    r2 = f"{p.r2:z.3f}" if p.r2 >= MIN_R2 else f"- (flat: within {p.rms_rel_err:z.1%} rms)"
    return [_interval(p.alpha_us, p.alpha_ci_us, ".1f"), beta, r2]


def fit_table_rows(rep: Report) -> tuple[list[str], list[list[str]]]:
    """One row per line of each series' model that earns it (two around a knee), cells as ``fit_cells``; the
    series without a model, and those whose asymptotic busbw is above the link's rate, are ``fit_misses``'
    lines, not rows."""
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
        if not f.fit.shown or f.above_link:
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
                "-" if f.link_beta_gbps is None or not last else f"{f.link_beta_gbps:z.4g}",
                "-" if f.ring_ratio is None or not last else f"{f.ring_ratio:z.2f}",
            ]
            if rep.link_rate:
                row.append("-" if f.rate_ratio is None or not last else f"{f.rate_ratio:z.2f}")
            rows.append(row)
    return head, rows


def fit_misses(rep: Report) -> list[str]:
    """One line per kind of series without a model row, naming the series by experiment: "no model: too few
    points", "no model: too noisy" (each series with its reason), and the series flagged because their
    asymptotic busbw is above the link's rate."""
    from suite.model.fit import MIN_MODEL_SIZES

    worlds = len({f.world_size for f in rep.fits}) > 1

    def name(f, why: str = "") -> str:
        return f.series + (f" ({f.world_size} ranks)" if worlds else "") + (f" ({why})" if why else "")

    def line(head: str, named: list[tuple[str, str]]) -> str:
        by_exp: dict = {}
        for exp, text in named:
            by_exp.setdefault(exp, []).append(text)
        return f"{len(named)} series, {head}: " + "; ".join(f"{e}: {', '.join(ns)}" for e, ns in by_exp.items())

    few = [(f.experiment, name(f)) for f in rep.fits if (f.fit.no_model() or "").startswith("too few points")]
    noisy = [
        (f.experiment, name(f, f.fit.no_model().removeprefix("too noisy: ")))
        for f in rep.fits
        if (f.fit.no_model() or "").startswith("too noisy")
    ]
    above = [
        (f.experiment, name(f, f"busbw∞ {f.link_beta_gbps:z.3g} GB/s > the link's {f.link.beta_gbps:z.3g} GB/s"))
        for f in rep.fits
        if f.above_link
    ]
    out = []
    if few:
        out.append(line(f"no model: too few points (a model needs {MIN_MODEL_SIZES} sizes)", few))
    if noisy:
        out.append(line("no model: too noisy", noisy))
    if above:
        out.append(
            line(
                "flagged, not tabled: the asymptotic busbw is above the link's rate, beyond its interval "
                "(a rate the link does not carry is no model of the op over it)",
                above,
            )
        )
    return out


def _note() -> str:
    from suite.model import fit

    return (
        "α–β fit: time(S) = α + S/β per series, weighted least squares on relative error; R² of log(time); "
        "[95% CI] from a bootstrap over the sizes (fixed seed). Where the protocol changes with size the series "
        "is fitted as two lines around a knee, kept only if that cuts the weighted squared error to a fifth and one "
        "line misses by more than 3% rms. A line is shown as a model only where it earns it: at least "
        f"{fit.MIN_MODEL_SIZES} sizes, R² of at least {fit.MIN_R2} (or within {fit.MAX_RMS_REL:z.0%} rms of the "
        f"points), α's interval at most {fit.MAX_ALPHA_CI_SHARE:z.0%} of the smallest time wide and β's spanning "
        f"at most {fit.MAX_BETA_CI_RATIO:z.0f}x; every other series is one line, 'no model: too few points' or "
        "'no model: too noisy', with its reason. A series whose time does not grow with size has no β "
        "('time flat in size'); one whose asymptotic busbw is above the link's rate is flagged, not tabled. "
        "Ring model: time = a(n)·α_link + f(n)·S/β_link with a(n) latency steps and f(n) the busbw factor "
        "(all_reduce 2(n−1), 2(n−1)/n; all_gather/reduce_scatter/all_to_all (n−1), (n−1)/n; broadcast/reduce "
        "(n−1), 1), over the run's link figure. 'link β' is the large-size β times f(n), i.e. the asymptotic "
        "busbw; 'measured / ring' > 1 means the op is slower than a ring over the reference link would be."
    )


FIT_NOTE = _note()
