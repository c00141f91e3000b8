"""The report's sections: Plot and Section, and the one an experiment without its own gets -- per group a
pair heatmap, a size sweep with its fits and ring model, or bars, then its grids and text tables -- and
the prediction section. Figures are drawn by suite/report/plots.py."""

from __future__ import annotations

from suite.metrics import format_time_us

from dataclasses import dataclass, field

from suite import registry, results
from suite.report.fits import Sweeps
from suite.report.series import extra_numeric_fields, is_pair_matrix, label_of, varying_fields
from suite.report.tables import format_tables, formatter


@dataclass(frozen=True, kw_only=True)
class Plot:
    name: str
    """File stem of the PNG (unique in the report)."""
    title: str
    png: bytes


@dataclass(kw_only=True)
class Section:
    title: str
    anchor: str
    notes: list[str] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    text_tables: list[str] = field(default_factory=list)
    grids: list[tuple[list[str], list[list[str]]]] = field(default_factory=list)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-") or "x"


class PlotNames:
    """``plot_name(*parts)``: a file stem for a figure, unique within one report (a repeat gets -2, -3, ...)."""

    def __init__(self) -> None:
        self.used: set = set()

    def __call__(self, *parts) -> str:
        base = _slug("-".join(str(p) for p in parts))[:80]
        name, i = base, 2
        while name in self.used:
            name, i = f"{base}-{i}", i + 1
        self.used.add(name)
        return name


def experiment_section(
    exp: str, groups: dict, sweeps: Sweeps, link_rate: tuple[str, float] | None, plot_name: PlotNames
) -> Section:
    """The generic section of experiment ``exp``'s groups (suite.report.series.groups_by_experiment): its
    spec's guide, a figure per group, a grid per group where the experiment has no text table of its own,
    and the text tables."""
    sec = Section(title=f"{exp}", anchor=_slug(exp))
    fmt = formatter(exp)
    spec = registry.spec(exp)
    if spec is not None and spec.guide:
        sec.notes.append(spec.guide.strip())  # "how to read" of its tables
    for (gk, backend, device, n), rs in groups.items():
        worlds = sorted({r["world_size"] for r in rs})
        over = sorted({r["world_size"] for r in rs if results.oversubscribed(r)})
        over_text = f"; {'/'.join(map(str, over))} OVERSUBSCRIBED" if over else ""
        title = f"{exp}: {gk} ({backend}, {device}, {'/'.join(map(str, worlds))} ranks{over_text})"
        key = (exp, gk, backend, device, n)
        if is_pair_matrix(rs):
            sec.plots.append(_pair_plot(key, rs, title, plot_name))
        elif key in sweeps.series:
            sec.plots.append(_sweep_plot(key, rs, title, sweeps, link_rate, plot_name))
        else:
            sec.plots.append(_bar_plot(key, rs, worlds, title, plot_name))
        if fmt is None:
            sec.grids.append(_grid(title, rs))
    sec.text_tables.append(format_tables([r for rs in groups.values() for r in rs]))
    return sec


def _pair_plot(key: tuple, rs: list[dict], title: str, plot_name: PlotNames) -> Plot:
    from suite.report import plots

    return Plot(name=plot_name(*key, "pairs"), title=title, png=plots.pair_matrix_plot(title, rs))


def _sweep_plot(
    key: tuple, rs: list[dict], title: str, sweeps: Sweeps, link_rate: tuple[str, float] | None, plot_name: PlotNames
) -> Plot:
    """Time against size per series, with the lines that fit and, for one op, the ring model over the link."""
    from suite.report import plots
    from suite.model.fit import ring_coefficients, ring_time_us

    exp, gk, backend, device, n = key
    ops = {r["op"] for r in rs}
    op = rs[0]["op"] if len(ops) == 1 else None  # one op: the ring model is drawn with it
    fits = {k: f for k, (_, f) in sweeps.fitted(key).items() if f.shown}  # only lines that earn a model
    link = sweeps.links.get((backend, device, n))
    ring = None
    ring_label = "ring model"
    if link is not None and op is not None and ring_coefficients(op, n) is not None:

        def ring(xs, op=op, n=n, link=link):
            return ring_time_us(op, n, link, xs)

        ring_label = f"ring model ({format_time_us(link.alpha_us)}, {link.beta_gbps:z.3g} GB/s per link)"
    return Plot(
        name=plot_name(*key),
        title=title,
        png=plots.sweep_plot(
            title,
            list(sweeps.series[key].items()),
            fits=fits,
            ring=ring,
            ring_label=ring_label,
            link_rate_gbps=link_rate[1] if link_rate else None,
            link_rate_text=link_rate[0] if link_rate else "",
        ),
    )


def _bar_plot(key: tuple, rs: list[dict], worlds: list[int], title: str, plot_name: PlotNames) -> Plot:
    """One bar per case of a single-size group: its time with the band, and up to four added numbers."""
    from suite.report import plots

    exp, gk, backend, device, _ = key
    fields = varying_fields(rs) + (["world_size"] if len(worlds) > 1 else [])
    labels = [label_of(r, fields) for r in rs]
    panels = [
        (
            f"time (µs), {results.BAND_LABEL}",
            [r["time_us"] for r in rs],
            [results.band_us(r) for r in rs],
        )
    ]
    for k in extra_numeric_fields(rs, varying_only=True)[:4]:
        panels.append((k, [r.get(k) for r in rs], None))
    return Plot(
        name=plot_name(exp, gk, backend, device, *worlds),
        title=title,
        png=plots.bar_plot(title, labels, panels),
    )


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:z.4g}"
    return str(v)


def _grid(title: str, rs: list[dict]) -> tuple[list[str], list[list[str]]]:
    """An HTML table of a generic group: varying identity fields, the shared measurements, added numbers."""
    ident = varying_fields(rs) + (["world_size"] if len({r["world_size"] for r in rs}) > 1 else [])
    extra = extra_numeric_fields(rs)
    cols = ident + ["size_bytes", "time_us", "iterations", "p05_us", "p95_us", "algbw_gbps", "busbw_gbps", "n_wrong"]
    cols += extra

    def cell(r, c):
        if c in results.TAIL_PERCENTILES:
            v = results.tail_us(r, c)
            return f"- (n={results.n_samples(r)})" if v is None else _fmt(v)
        return _fmt(r.get(c, ""))

    return [title] + cols, [[""] + [cell(r, c) for c in cols] for r in rs]


def prediction_section(run: dict, predict_doc: dict | None = None) -> Section | None:
    """Predicted vs measured at the run's scale -- the line saying whether the model holds, the figure with
    the error band, the table -- and the extrapolation table (suite.model); None when the run has nothing to
    fit."""
    from suite.model import report_section

    parts = report_section.report_parts(run, predict_doc)
    if parts is None:
        return None
    notes, grids, text, scale = parts
    plots = []
    if scale:
        from suite.model.validate import TARGET
        from suite.report.prediction_plot import Series, prediction_png

        ops = list(dict.fromkeys(r["op"] for r in scale if r["predicted_us"]))
        series = [
            Series(
                label=op,
                measured_us=[r["measured_us"] for r in scale if r["op"] == op and r["predicted_us"]],
                predicted_us=[r["predicted_us"] for r in scale if r["op"] == op and r["predicted_us"]],
                held=[r["bandwidth_bound"] for r in scale if r["op"] == op and r["predicted_us"]],
            )
            for op in ops
        ]
        title = "predicted against measured at the run's own scale"
        png = prediction_png(title, series, TARGET)
        plots.append(Plot(name="prediction-measured", title=title, png=png))
        notes = [report_section.held_line(scale, TARGET), *notes]  # what to see in it, first
    return Section(
        title="prediction at scale", anchor="prediction", notes=notes, plots=plots, grids=grids, text_tables=[text]
    )
