"""The report's prediction section: predicted vs measured at the run's scale and, from its predict.json,
the extrapolation table."""

from __future__ import annotations

from suite import metrics
from suite.model import step
from suite.model.algorithms import OPS
from suite.model.document import format_predictions, measured_scale, stored_predictions
from suite.model.run_model import fit_runs
from suite.model.units import fmt_time, geomean_abs

REPORT_NOTE = (
    "Predicted vs measured at the run's own scale: the backend's algorithm (suite.model: Gloo's from its "
    "sources, checked against the run; NCCL's from NCCL_ALGO / its debug lines) over the op's link calibrated "
    "on these very points (in-sample: how well the model's shape fits), and, where the run has "
    "point-to-point records, over the link they measured (out-of-sample). error = predicted / measured − 1. "
    "The extrapolation table is the run's predict.json (make predict RUN=... RANKS=... RANKS_PER_NODE=...); "
    "* marks the algorithm the backend runs."
)


def report_parts(
    run: dict, doc: dict | None = None
) -> tuple[list[str], list[tuple[list[str], list[list[str]]]], str, list[dict]] | None:
    """(notes, grids, text, the measured_scale rows) of the report's prediction section from a stored run and
    its predict.json (the text: how to read it, each op's algorithm, then the tables); None if the run has
    nothing to fit."""
    model = fit_runs([run])
    if not model.points and not model.p2p:
        return None
    notes: list[str] = []
    about = [REPORT_NOTE, ""] + [  # how to read it: with the text tables, under the figure and the grids
        f"{op}: {model.choice(op, 0).algorithm} — {model.choice(op, 0).how}"
        + (f"; check: {model.checks[op]}" if op in model.checks else "")
        for op in OPS
    ]
    scale = measured_scale(model)
    head, rows, text = _measured_grid(scale)
    text = [*about, "", *text]
    grids = [(head, rows)]
    if doc:
        ehead, erows, etext = _extrapolation_grid(doc)
        grids.append((ehead, erows))
        text += etext
        notes += [sm.report_note(d, doc["ranks"]) for n, sm in step.step_models().items() for d in doc.get(n) or []]
    else:
        notes.append(
            "No predict.json in the run directory: `make predict RUN=<run> RANKS=<n> RANKS_PER_NODE=<p>` adds "
            "the extrapolation table."
        )
    return notes, grids, "\n".join(text), scale


def _measured_grid(scale: list[dict]) -> tuple[list[str], list[list[str]], list[str]]:
    """(head, rows, text lines) of predicted vs measured at the run's own points."""
    head = [
        "measured vs predicted at the run's scale",
        "op",
        "ranks",
        "size",
        "algorithm",
        "measured",
        "predicted",
        "error",
        "over p2p link",
        "error (p2p)",
        "bottleneck",
    ]
    rows, text = [], ["  ".join(f"{c:>10}" for c in head[1:])]
    for r in scale:
        q = r.get("predicted_p2p_us")
        cells = [
            r["op"],
            str(r["ranks"]),
            metrics.format_size(r["size_bytes"]) if r["size_bytes"] else "-",
            r["algorithm"],
            fmt_time(r["measured_us"]),
            fmt_time(r["predicted_us"]) if r["predicted_us"] else "-",
            f"{100 * r['error']:+z.1f}%" if r["error"] is not None else "-",
            fmt_time(q) if q else "-",
            f"{100 * r['error_p2p']:+z.1f}%" if r.get("error_p2p") is not None else "-",
            r["bottleneck"],
        ]
        rows.append([""] + cells)
        text.append("  ".join(f"{c:>10}" for c in cells))
    return head, rows, text


def _extrapolation_grid(doc: dict) -> tuple[list[str], list[list[str]], list[str]]:
    """(head, rows, text lines) of predict.json's extrapolation table."""
    ehead = [
        f"extrapolation to {doc['ranks']} ranks ({doc['ranks_per_node']} per node)",
        "op",
        "size",
        "algorithm",
        "time",
        "95% interval",
        "busbw (GB/s)",
        "bottleneck",
    ]
    erows = []
    for p in doc.get("predictions") or []:
        ci = p.get("time_ci_us")
        erows.append(
            [
                "",
                p["op"],
                metrics.format_size(p["size_bytes"]) if p["size_bytes"] else "-",
                p["algorithm"] + (" *" if p.get("backend_choice") else ""),
                fmt_time(p["time_us"]),
                f"[{fmt_time(ci[0])}, {fmt_time(ci[1])}]" if ci else "-",
                f"{p['busbw_gbps']:z.4g}" if p.get("busbw_gbps") is not None else "-",
                p["bottleneck"],
            ]
        )
    return ehead, erows, ["", ehead[0], format_predictions(stored_predictions(doc))]


def held_line(scale: list[dict], target: float) -> str:
    """Whether the model holds at the run's own points, in one line: how many bandwidth-bound ones are within
    ``target`` and their geomean |error|, then the latency-bound ones' (not held to it)."""
    rows = [r for r in scale if r["error"] is not None]
    bound = [r["error"] for r in rows if r["bandwidth_bound"]]
    loose = geomean_abs([r["error"] for r in rows if not r["bandwidth_bound"]])
    t = f"±{100 * target:z.0f}%"
    if bound:
        g = geomean_abs(bound)
        said = (
            f"the model {'holds' if g <= target else 'misses'}: {sum(abs(e) <= target for e in bound)} of "
            f"{len(bound)} bandwidth-bound sizes within {t} (geomean |error| {100 * g:z.1f}%)"
        )
    else:
        said = f"no size is bandwidth-bound, nothing to hold to {t}"
    loose_text = f"; latency-bound sizes (not held to it): {100 * loose:z.0f}%" if loose is not None else ""
    return f"At the run's own scale (in-sample: the links were fitted on these points), {said}{loose_text}."
