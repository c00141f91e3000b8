"""A report of a stored run: Report, and build_report, which assembles it from the environment summary
(suite/report/environment.py), a section per experiment (its own, or suite/report/sections.py's), the α–β
fits (suite/report/fits.py), the prediction, the pictures that open it (suite/report/glance.py) and the summary
rows (suite/report/summary.py). Reads records only; renders nothing (suite/report/render.py)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from suite import results
from suite.model.link_rate import configured_link_rate, link_figures
from suite.report.environment import environment_summary
from suite.report.fits import FitRow, fit_rows, fit_sweeps
from suite.report.glance import Glance, build_glance
from suite.report.sections import PlotNames, Section, experiment_section, prediction_section
from suite.report.series import groups_by_experiment
from suite.report.specs import spec_value
from suite.report.summary import summary_rows


@dataclass(kw_only=True)
class Report:
    run_name: str
    environment: list[tuple[str, str]]
    sections: list[Section]
    fits: list[FitRow]
    links: dict
    link_rate: tuple[str, float] | None
    n_records: int
    summary: list[tuple[str, str]] = field(default_factory=list)
    """What the run means: status, what was measured, peaks, health, unstable, skipped, baseline."""
    glance: Glance | None = None
    """What opens the report: the headline, the headline figure, each experiment's first picture."""


def build_report(
    run: dict, run_name: str = "", predict_doc: dict | None = None, base: tuple[str, list[list[dict]]] | None = None
) -> Report:
    """Analyse a loaded run: sections with plots and tables, α–β fits, ring-model comparison (and the
    prediction section, with the extrapolation table of ``predict_doc``, the run's predict.json)."""
    recs = results.records(run)
    link_rate = configured_link_rate(run.get("machine_info") or {})
    # each experiment's place: its spec's report_order (the doctor's verdict leads, then collectives), then
    # the records' order
    by_exp = OrderedDict(
        sorted(groups_by_experiment(recs).items(), key=lambda kv: spec_value(kv[0], "report_order", 0))
    )
    sweeps = fit_sweeps(recs, by_exp, link_figures(run))  # fits for every sweep; the link: one figure per link

    fits: list[FitRow] = []
    sections: list[Section] = []
    plot_name = PlotNames()
    memo: dict = {}  # what an experiment's report hooks share within this report (the doctor's diagnosis)
    own: dict[str, Section] = {}  # the sections experiments drew themselves
    for exp, groups in by_exp.items():
        hook = spec_value(exp, "report_section", None)
        if hook is not None:  # an experiment that draws its own section (the doctor's verdicts)
            own[exp] = hook(run, plot_name, memo.setdefault(exp, {}))
            sections.append(own[exp])
            continue
        sections.append(experiment_section(exp, groups, sweeps, link_rate, plot_name))
        for gk, backend, device, n in groups:
            if (exp, gk, backend, device, n) in sweeps.series:
                fits += fit_rows((exp, gk, backend, device, n), sweeps, link_rate)
    for sec, groups in zip(sections, by_exp.values()):  # one section per experiment, in order
        mark_oversubscribed(sec, groups)
    pred = prediction_section(run, predict_doc)
    if pred is not None:
        sections.append(pred)

    return Report(
        run_name=run_name,
        environment=environment_summary(run),
        sections=sections,
        fits=fits,
        links=sweeps.links,
        link_rate=link_rate,
        n_records=len(recs),
        summary=summary_rows(run, base, memo),
        glance=build_glance(run, own, plot_name),
    )


def mark_oversubscribed(sec: Section, groups: dict) -> None:
    """Open an experiment's section with a note naming its records of the oversubscribed pass, if any."""
    over = [r for rs in groups.values() for r in rs if results.oversubscribed(r)]
    if over:
        worlds = "/".join(map(str, sorted({r["world_size"] for r in over})))
        sec.notes.insert(0, f"{len(over)} case(s) at {worlds} ranks: {results.OVERSUBSCRIBED_NOTE}.")
