"""The DDP step at N ranks from this experiment's records (suite.model's docstring: compute + bucket
all_reduces − the hidden share): the step model (suite.model.step) behind the spec's ``step_model`` hook,
what the step adds to predict.json ("ddp"), to the validation ("ddp", "ddp_summary"), to make predict's
output and to the report's notes. Offline: it reads stored records and imports no torch."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

from suite.model.links import Links, Topology
from suite.model.prediction import predict
from suite.model.run_model import RunModel
from suite.model.runs import record_topology, run_topology, usable
from suite.model.step import StepModel, of_module, measured_text, row_text, split_text
from suite.model.units import fmt_time


def ddp_baselines(run: dict) -> list[dict]:
    """Per model of the ddp experiment: the default-DDP record and the numbers the step model needs."""
    from suite.api import records

    out = []
    for r in records(run):
        if r.get("experiment") != "ddp" or r.get("op") != "ddp_step" or r.get("label") != "ddp" or not usable(r):
            continue
        need = ("noop_step_ms", "allreduce_ms", "solo_step_ms", "bucket_sizes", "overlap_saved_ms")
        if all(r.get(k) is not None for k in need):
            out.append(r)
    return out


def predict_ddp(rec: dict, topo: Topology, links: Links, algorithm: str) -> dict:
    """The DDP step at ``topo`` (suite.model's docstring): compute + bucket all_reduces − the hidden share."""
    measured_topo = record_topology(rec)
    buckets = [int(b) for b in rec["bucket_sizes"]]

    def comm_us(t):
        return sum(predict("all_reduce", algorithm, t, links, b).time_us for b in buckets)

    comm0 = comm_us(measured_topo)
    frac = min(max(rec["overlap_saved_ms"] / rec["allreduce_ms"], 0.0), 1.0) if rec["allreduce_ms"] > 0 else 0.0
    window_us = (rec.get("ddp_logger_backward_compute_ms") or math.inf) * 1e3
    noop_us, solo_us = rec["noop_step_ms"] * 1e3, rec["solo_step_ms"] * 1e3

    def step_us(comm):
        return noop_us + comm - min(frac * comm, window_us)

    comm = comm_us(topo)
    step = step_us(comm)
    return {
        "model": rec.get("model"),
        "ranks": topo.ranks,
        "ranks_per_node": topo.ranks_per_node,
        "n_buckets": len(buckets),
        "bucket_sizes": buckets,
        "compute_us": noop_us,
        "solo_step_us": solo_us,
        "comm_us": comm,
        "hidden_fraction": frac,
        "hidden_us": min(frac * comm, window_us),
        "step_us": step,
        "scaling_efficiency": solo_us / step if step > 0 else None,
        "algorithm": algorithm,
        "measured_ranks": measured_topo.ranks,
        "measured_step_us": rec["time_us"],
        "model_step_at_measured_us": step_us(comm0),
        "model_comm_at_measured_us": comm0,
        "measured_allreduce_us": rec["allreduce_ms"] * 1e3,
    }


def ddp_baselines_from(model: RunModel) -> list[dict]:
    return ddp_baselines({"benchmarks": [{"extra_info": r} for r in model.records]})


PROVENANCE = {
    "ddp.step_us": "modelled: measured no-op-hook step + modelled bucket all_reduces − the measured hidden share",
    "ddp.scaling_efficiency": "derived: measured solo step / modelled step",
}
"""predict.json's provenance of the numbers of its "ddp" entries."""


def predict_at(model: RunModel, topo: Topology) -> list[dict]:
    """predict.json's "ddp": the step of each model the run's ddp records hold, at ``topo``."""
    out = []
    for rec in ddp_baselines_from(model):
        alg = model.choice("all_reduce", max(rec["bucket_sizes"])).algorithm or "ring"
        out.append(predict_ddp(rec, topo, model.links_for("all_reduce"), alg))
    return out


def validation_rows(model: RunModel, check: Sequence[dict]) -> list[dict]:
    """The validation's "ddp": each check run's DDP step predicted from the fit run nearest its scale."""
    rows = []
    fit_ddp = ddp_baselines_from(model)
    for run in check:
        t = run_topology(run)
        for rec in ddp_baselines(run):
            # the fit run nearest the check scale: its compute, buckets and overlap
            same = [b for b in fit_ddp if b.get("model") == rec.get("model")]
            if not same:
                continue
            base = min(same, key=lambda b: (abs(int(b["world_size"]) - t.ranks), -int(b["world_size"])))
            pr = predict_ddp(
                base,
                t,
                model.links_for("all_reduce"),
                model.choice("all_reduce", max(base["bucket_sizes"])).algorithm or "ring",
            )
            rows.append(
                {
                    "model": rec.get("model"),
                    "ranks": t.ranks,
                    "fit_ranks": int(base["world_size"]),
                    "predicted_us": pr["step_us"],
                    "predicted_comm_us": pr["comm_us"],
                    "predicted_hidden_us": pr["hidden_us"],
                    "compute_us": pr["compute_us"],
                    "measured_us": rec["time_us"],
                    "error": (pr["step_us"] - rec["time_us"]) / rec["time_us"],
                }
            )
    return rows


def step_line(d: dict, ranks: int) -> str:
    """make predict's line of one predict.json "ddp" entry."""
    return (
        f"ddp step ({d['model']}, {d['n_buckets']} buckets): {split_text(d)} at {ranks} ranks; "
        f"scaling efficiency {d['scaling_efficiency']:z.3f} ({measured_text(d)})"
    )


def report_note(d: dict, ranks: int) -> str:
    """The report's note of one predict.json "ddp" entry."""
    return (
        f"DDP step ({d['model']}) at {ranks} ranks: {fmt_time(d['step_us'])}, scaling efficiency "
        f"{d['scaling_efficiency']:z.3f} ({measured_text(d, ' ')})"
    )


def row_line(r: dict) -> str:
    """The validation table's line of one "ddp" row."""
    source = f"from the {r['fit_ranks']}-rank run"
    return f"ddp step ({r['model']}) {row_text(r, 'all_reduce', source)}, error {100 * r['error']:+z.1f}%"


def step_model() -> StepModel:
    """The spec's ``step_model`` hook."""
    return of_module(sys.modules[__name__])
