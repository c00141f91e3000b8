"""A training step at N ranks, modelled by the experiment that measured it: the protocol between
suite.model and an experiment's ``model.py`` (its spec's ``step_model`` hook).

suite.model knows no experiment: ``step_models()`` finds every spec that names a step model, and
predict.json, the validation and the report carry each one's entries under the experiment's name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from suite.model.units import fmt_time, geomean_abs


@dataclass(frozen=True, kw_only=True)
class StepModel:
    """What one experiment's step model gives make predict, make validate-predict and the report."""

    provenance: dict[str, str]
    """predict.json's provenance of the numbers of its entries (keys ``<experiment>.<field>``)."""
    predict_at: Callable[..., list[dict]]
    """predict_at(run_model, topo) -> predict.json's entries: the step of each model the run holds."""
    validation_rows: Callable[..., list[dict]]
    """validation_rows(run_model, check_runs) -> one row per check-run step, each with its ``error``
    (predicted / measured − 1)."""
    step_line: Callable[[dict, int], str]
    """make predict's line of one entry at ``ranks``."""
    report_note: Callable[[dict, int], str]
    """The report's note of one entry at ``ranks``."""
    row_line: Callable[[dict], str]
    """The validation table's line of one row."""
    notes_at: Callable[..., list[str]] = lambda run_model, topo: []
    """notes_at(run_model, topo) -> make predict's lines for what the run holds but the model does not predict
    at ``topo``, each with its reason (e.g. a mesh that does not divide the ranks)."""
    row_group: str | None = None
    """A row field whose values get their own geomean in the summary (``by``), e.g. a strategy."""


HOOKS = ("predict_at", "validation_rows", "step_line", "report_note", "row_line")
"""The functions every step model's module defines under these names (StepModel's fields)."""


def of_module(module, **more) -> StepModel:
    """The StepModel of a ``model.py`` that defines ``PROVENANCE`` and the HOOKS; ``more``: the optional
    fields (``notes_at``, ``row_group``)."""
    return StepModel(provenance=module.PROVENANCE, **{h: getattr(module, h) for h in HOOKS}, **more)


def split_text(d: dict) -> str:
    """An entry's step as its parts: "compute C + comm X − hidden H = S"."""
    return (
        f"compute {fmt_time(d['compute_us'])} + comm {fmt_time(d['comm_us'])} − hidden {fmt_time(d['hidden_us'])} "
        f"= {fmt_time(d['step_us'])}"
    )


def measured_text(d: dict, sep: str = ": ") -> str:
    """An entry's model and measurement at the measured scale."""
    return (
        f"model at the measured {d['measured_ranks']} ranks{sep}{fmt_time(d['model_step_at_measured_us'])}, "
        f"measured {fmt_time(d['measured_step_us'])}"
    )


def row_text(r: dict, comm: str, source: str) -> str:
    """A validation row after its name: predicted (its parts, ``comm`` naming the communication, ``source``
    the fit), measured, error."""
    return (
        f"at {r['ranks']} ranks: predicted {fmt_time(r['predicted_us'])} (compute {fmt_time(r['compute_us'])} + "
        f"{comm} {fmt_time(r['predicted_comm_us'])} − hidden {fmt_time(r['predicted_hidden_us'])}, {source}), "
        f"measured {fmt_time(r['measured_us'])}"
    )


def step_models() -> dict[str, StepModel]:
    """Every experiment's step model, by experiment name (the specs whose ``step_model`` hook is set)."""
    from suite import registry

    return {name: spec.step_model() for name, spec in registry.discover().items() if spec.step_model}


def validation(model, check: Sequence[dict]) -> dict:
    """The validation's entries of every step model: ``<name>`` rows and ``<name>_summary``."""
    out: dict = {}
    for name, sm in step_models().items():
        rows = sm.validation_rows(model, check)
        out[name] = rows
        out[f"{name}_summary"] = _summary(rows, sm.row_group) if rows else None
    return out


def _summary(rows: Sequence[dict], group: str | None) -> dict:
    out = {"geomean_abs_error": geomean_abs([r["error"] for r in rows]), "n": len(rows)}
    if group:
        keys = sorted({str(r[group]) for r in rows})
        out["by"] = {k: _summary([r for r in rows if str(r[group]) == k], None) for k in keys}
    return out


def validation_lines(v: dict) -> list[str]:
    """The validation table's lines of every step model's rows and summary."""
    out = []
    for name, sm in step_models().items():
        out += [sm.row_line(r) for r in v.get(name) or []]
        if v.get(f"{name}_summary"):
            d = v[f"{name}_summary"]
            out.append(f"{name} step: geomean |err| {100 * d['geomean_abs_error']:z.1f}% over {d['n']} scales")
            for k, g in (d.get("by") or {}).items():
                err = 100 * g["geomean_abs_error"]
                out.append(f"{name} step ({k}): geomean |err| {err:z.1f}% over {g['n']} scales")
    return out
