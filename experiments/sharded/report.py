"""The sharded experiment's place in the report (its spec's ``report_section`` and ``glance`` hooks): how to
read its table, one figure per run group that splits each strategy's step into compute, exposed
communication and hidden communication (experiments/sharded/decompose.py), and the table; at the top of the
report the first group's figure, with the bytes each strategy moves per step against DDP's beside it. Reads
stored records only."""

from __future__ import annotations

from collections import OrderedDict

from suite.api import Picture, Plot, Section, figures, records

from . import table

EXPERIMENT = "sharded"

CAPTION = (
    "sharded: each strategy's training step split into compute, the communication the step waits for "
    "(exposed) and the communication hidden under compute; beside it, the collective bytes it moves per step "
    "against DDP's. A long exposed bar is communication to overlap or shrink."
)


def decomposition_plot(title: str, recs: list[dict], against_ddp: bool = False) -> bytes | None:
    """Per strategy (its replay record): compute, exposed and hidden communication stacked, ms, with the
    step's median marked (``against_ddp``: its bus bytes per step / DDP's beside it); None where no record
    has the decomposition."""
    rows = [r for r in recs if r.get("op") == "comm_replay" and r.get("compute_s") is not None]
    if not rows:
        return None
    ms = lambda k: [r[k] * 1e3 for r in rows]  # noqa: E731
    vs_ddp = {r.get("strategy"): r.get("bus_vs_ddp") for r in recs if r.get("op") == "train_step"}
    return figures.stacked_bar_plot(
        title,
        [str(r.get("strategy")) for r in rows],
        [
            ("compute (the step on fake process groups)", ms("compute_s"), ""),
            ("exposed communication: max(step - compute, 0)", ms("exposed_comm_s"), ""),
            ("hidden communication: max(replay - exposed, 0)", ms("hidden_comm_s"), "//"),
        ],
        xlabel="time of one training step (ms, median, slowest rank)",
        marks=("step", ms("step_s")),
        beside=("bus bytes per step / DDP's", [vs_ddp.get(r.get("strategy")) for r in rows]) if against_ddp else None,
    )


def _groups(run: dict) -> OrderedDict:
    groups: OrderedDict = OrderedDict()
    for r in records(run):
        if r.get("experiment") == EXPERIMENT:
            groups.setdefault((r["backend"], r["device"], r["world_size"]), []).append(r)
    return groups


def _title(backend: str, device: str, world: int) -> str:
    return f"sharded: where the step's time goes ({backend}, {device}, {world} ranks)"


def section(run: dict, plot_name, memo: dict) -> Section:
    """How to read, then per (backend, device, world size): the decomposition figure and the table."""
    sec = Section(title=EXPERIMENT, anchor=EXPERIMENT)
    sec.notes.append(table.__doc__.strip())
    for (backend, device, world), recs in _groups(run).items():
        title = _title(backend, device, world)
        png = decomposition_plot(title, recs)
        if png is not None:
            sec.plots.append(Plot(name=plot_name(EXPERIMENT, backend, device, world), title=title, png=png))
        sec.text_tables.append(table.format_tables(recs))
    return sec


def glance(run: dict, recs: list[dict]) -> Picture | None:
    """The first group's decomposition with the bytes per step against DDP's; None without a decomposition."""
    for key, group in _groups(run).items():
        png = decomposition_plot(_title(*key), group, against_ddp=True)
        if png is not None:
            return Picture(title=_title(*key), png=png, caption=CAPTION)
    return None
