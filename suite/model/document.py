"""The extrapolation table and the predict.json document of ``make predict``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from suite import metrics
from suite.model import step
from suite.model.algorithms import CANDIDATES, OPS
from suite.model.links import CLASSES, Links, Topology, complete_links
from suite.model.prediction import BANDWIDTH_BOUND, Prediction, predict
from suite.model.run_model import RunModel
from suite.model.units import fmt_time


def extrapolate(model: RunModel, topo: Topology, sizes: Sequence[int]) -> list[Prediction]:
    """Every op, size and model at ``topo``; the backend's algorithm marked."""
    out = []
    for op in OPS:
        for s in [0] if op == "barrier" else sizes:
            choice = model.choice(op, s).algorithm
            for alg in CANDIDATES[op]:
                pr = predict(op, alg, topo, model.links_for(op), s)
                if pr is not None:
                    out.append(dataclasses.replace(pr, backend_choice=alg == choice))
    return out


def measured_scale(model: RunModel) -> list[dict]:
    """Predicted (the backend's algorithm over the op's calibrated link: in-sample; and over the
    point-to-point link where the run has one: out-of-sample) vs measured, at the run's own points."""
    rows = []
    for p in model.points:
        alg = model.choice(p.op, p.size_bytes).algorithm or "ring"
        pr = predict(p.op, alg, p.topo, model.links_for(p.op), p.size_bytes)
        row = {
            "op": p.op,
            "size_bytes": p.size_bytes,
            "ranks": p.topo.ranks,
            "algorithm": alg,
            "measured_us": p.time_us,
            "predicted_us": pr.time_us if pr else None,
            "error": (pr.time_us - p.time_us) / p.time_us if pr else None,
            "bottleneck": pr.bottleneck if pr else "",
            "bandwidth_bound": bool(pr) and pr.bandwidth_us >= BANDWIDTH_BOUND * p.time_us,
        }
        if model.p2p:
            q = predict(p.op, alg, p.topo, model.p2p, p.size_bytes)
            row["predicted_p2p_us"] = q.time_us if q else None
            row["error_p2p"] = (q.time_us - p.time_us) / p.time_us if q else None
        rows.append(row)
    return rows


def format_links(links: Links, title: str) -> list[str]:
    out = []
    for c in CLASSES:
        lk = links.get(c)
        if lk is None:
            continue
        ci = "" if not lk.beta_ci_gbps else f" [{lk.beta_ci_gbps[0]:z.4g}, {lk.beta_ci_gbps[1]:z.4g}]"
        aci = "" if not lk.alpha_ci_us else f" [{fmt_time(lk.alpha_ci_us[0])}, {fmt_time(lk.alpha_ci_us[1])}]"
        knee = (
            f"; below {metrics.format_size(int(lk.knee_bytes))} messages α {fmt_time(lk.small[0])}, "
            f"β {lk.small[1]:z.4g} GB/s"
            if lk.small
            else ""
        )
        out.append(
            f"#   {title} {c}-node: α {fmt_time(lk.alpha_us)}{aci}, β {lk.beta_gbps:z.4g} GB/s{ci}{knee} ({lk.source})"
        )
    return out


def format_predictions(preds: Sequence[Prediction]) -> str:
    head = f"{'op':<15}{'size':>8}  {'algorithm':<18}{'time':>11}  {'95% interval':<22}{'busbw GB/s':>11}  bottleneck"
    lines = [head, "-" * len(head)]
    for p in preds:
        ci = f"[{fmt_time(p.time_ci_us[0])}, {fmt_time(p.time_ci_us[1])}]" if p.time_ci_us else "-"
        bw = f"{p.busbw_gbps:z.4g}" if p.busbw_gbps is not None else "-"
        mark = " *" if p.backend_choice else ""
        lines.append(
            f"{p.op:<15}{metrics.format_size(p.size_bytes) if p.size_bytes else '-':>8}  "
            f"{p.algorithm + mark:<18}{fmt_time(p.time_us):>11}  {ci:<22}{bw:>11}  "
            f"{p.bottleneck} ({100 * p.bottleneck_share:z.0f}%)"
        )
    return "\n".join(lines) + "\n"


PROVENANCE = {
    "links": "derived: α–β per link class fitted (suite.model.fit.fit_model, bootstrap 95% intervals) to "
    "point-to-point records, and per op calibrated through the backend's algorithm model to the op's measured series",
    "predictions.time_us": "modelled: the named algorithm's α–β model (suite.model) over the links",
    "predictions.time_ci_us": "modelled: the same model at the slow and fast ends of the links' intervals",
    "predictions.busbw_gbps": "derived: size_bytes / time_us x nccl-tests busbw factor at ranks (suite.metrics)",
    "predictions.bottleneck": "modelled: the largest α or β component of the model's time, with its link class",
    "predictions.backend_choice": "found: Gloo from its sources checked against the run; "
    "NCCL from NCCL_ALGO / debug lines",
    "measured_scale.measured_us": "measured: the record's time_us",
    "measured_scale.predicted_us": "modelled: backend's algorithm over the op's calibrated link (in-sample)",
    "measured_scale.predicted_p2p_us": "modelled: backend's algorithm over the point-to-point link (out-of-sample)",
    "measured_scale.bandwidth_bound": "modelled: the model's β part is >= 50% of the measured time "
    "(suite.model.prediction.BANDWIDTH_BOUND)",
}
"""predict.json's provenance; each step model adds its own (suite.model.step)."""


def stored_predictions(doc: dict) -> list[Prediction]:
    """The predictions of a predict.json document (its ``busbw_gbps`` is derived again, not stored)."""
    return [Prediction(**{k: v for k, v in p.items() if k != "busbw_gbps"}) for p in doc.get("predictions") or []]


def prediction_document(model: RunModel, topo: Topology, sizes: Sequence[int], run_name: str) -> dict:
    preds = extrapolate(model, topo, sizes)
    models = step.step_models()
    return {
        "run": run_name,
        "ranks": topo.ranks,
        "ranks_per_node": topo.ranks_per_node,
        "nodes": topo.nodes,
        "measured_ranks": model.topo.ranks,
        "measured_ranks_per_node": model.topo.ranks_per_node,
        "backend": model.backend,
        "links": {
            "p2p": {c: lk.as_dict() for c, lk in model.p2p.items()},
            "per_op": {op: {c: lk.as_dict() for c, lk in ls.items()} for op, ls in model.op_links.items()},
            "default": {c: lk.as_dict() for c, lk in complete_links(model.default_links, topo).items()}
            if model.default_links
            else {},
        },
        "algorithms": {op: dataclasses.asdict(model.choice(op, max(sizes) if sizes else 0)) for op in OPS},
        "predictions": [p.as_dict() for p in preds],
        "measured_scale": measured_scale(model),
        **{name: sm.predict_at(model, topo) for name, sm in models.items()},
        "provenance": PROVENANCE | {k: v for sm in models.values() for k, v in sm.provenance.items()},
    }
