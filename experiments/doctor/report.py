"""The doctor's place in the report (its spec's ``report_section`` and ``summary`` hooks): the verdicts
lead, then its picture (picture.py, also the report's first picture of the doctor: the link matrices with the
finding outlined) and every rank's time distribution per probe; the first screen's health row.
Reads stored records only."""

from __future__ import annotations

from suite.api import Clause, Plot, Section, rank_plots, records

from . import picture, stragglers, verdict


def _diagnosis(run: dict, memo: dict):
    """The run's diagnosis, once per report (``memo``: shared by this experiment's hooks)."""
    if "diagnosis" not in memo:
        memo["diagnosis"] = verdict.diagnose(run)
    return memo["diagnosis"]


def section(run: dict, plot_name, memo: dict) -> Section:
    """The doctor's verdicts first, then its picture (picture.py: the link matrices with the finding outlined,
    the straggler's bars) and every rank's time distribution per probe."""
    d = _diagnosis(run, memo)
    sec = Section(title="doctor: is anything wrong, and where", anchor="doctor")
    sec.notes.append(verdict.format_verdict(d).rstrip())
    if d.findings:
        sec.grids.append(
            (
                ["finding", "where", "measured", "expected", "ratio", "confidence", "evidence"],
                [
                    [f.kind, f.where, f.measured, f.expected, f"{f.ratio:z.2f}", f.confidence, ", ".join(f.evidence)]
                    for f in d.findings
                ],
            )
        )
    if d.links:  # the picture that opens the report, again (the page shows it once and links it here)
        pic = picture.picture(run, d)
        sec.plots.append(Plot(name=plot_name("doctor", "links"), title=pic.title, png=pic.png))
    probes = stragglers.rank_time_probes(records(run))
    if probes:
        sec.plots.append(
            Plot(
                name=plot_name("doctor", "ranks"),
                title="every rank's own time, per probe (communication: less its wait for the last to arrive)",
                png=rank_plots.rank_distributions(probes, [s["rank"] for s in d.stragglers]),
            )
        )
    sec.notes.append(verdict.__doc__.split("\n\n", 2)[2].strip())  # the rules, as the module states them
    return sec


def summary(run: dict, memo: dict) -> tuple[str, str]:
    """The health row: the findings, healthy, or how to get a health check."""
    if not any(r.get("experiment") == verdict.EXPERIMENT for r in records(run)):
        return ("health (doctor)", "no health check in this run (make doctor)")
    return ("health (doctor)", _diagnosis(run, memo).headline)


def headline(run: dict, recs: list[dict]) -> Clause:
    """The diagnosis in one line (healthy, or each finding), with the doctor's own verdict."""
    d = verdict.diagnose(run)
    return Clause(text=f"{d.headline} ({len(recs)} probes)", verdict=d.verdict, numbers={"findings": len(d.findings)})
