"""The sharded experiment's place in the report (its spec's ``report_section`` hook): how to read its
table, one figure per run group that splits each strategy's step into compute, exposed communication and
hidden communication (experiments/sharded/decompose.py), and the table. Reads stored records only."""

from __future__ import annotations

from collections import OrderedDict

from suite.api import Plot, Section, plots, records

from . import table

EXPERIMENT = "sharded"


def decomposition_plot(title: str, recs: list[dict]) -> bytes | None:
    """Per strategy (its replay record): compute, exposed and hidden communication stacked, ms, with the
    step's median marked; None where no record has the decomposition."""
    rows = [r for r in recs if r.get("op") == "comm_replay" and r.get("compute_s") is not None]
    if not rows:
        return None
    ms = lambda k: [r[k] * 1e3 for r in rows]  # noqa: E731
    return plots.stacked_bar_plot(
        title,
        [str(r.get("strategy")) for r in rows],
        [
            ("compute (the step on fake process groups)", ms("compute_s"), ""),
            ("exposed communication: max(step - compute, 0)", ms("exposed_comm_s"), ""),
            ("hidden communication: max(replay - exposed, 0)", ms("hidden_comm_s"), "//"),
        ],
        xlabel="time of one training step (ms, median, slowest rank)",
        marks=("step", ms("step_s")),
    )


def section(run: dict, plot_name, memo: dict) -> Section:
    """How to read, then per (backend, device, world size): the decomposition figure and the table."""
    sec = Section(title=EXPERIMENT, anchor=EXPERIMENT)
    sec.notes.append(table.__doc__.strip())
    groups: OrderedDict = OrderedDict()
    for r in records(run):
        if r.get("experiment") == EXPERIMENT:
            groups.setdefault((r["backend"], r["device"], r["world_size"]), []).append(r)
    for (backend, device, world), recs in groups.items():
        title = f"sharded: where the step's time goes ({backend}, {device}, {world} ranks)"
        png = decomposition_plot(title, recs)
        if png is not None:
            sec.plots.append(Plot(name=plot_name(EXPERIMENT, backend, device, world), title=title, png=png))
        sec.text_tables.append(table.format_tables(recs))
    return sec
