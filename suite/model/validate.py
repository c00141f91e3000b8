"""Validation: fit the links on some runs, predict the others' points, and the error table."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from suite import metrics
from suite import op_table
from suite.model import step
from suite.model.algorithms import OPS
from suite.model.prediction import BANDWIDTH_BOUND, predict
from suite.model.run_model import check_algorithms, fit_runs
from suite.model.runs import collective_points
from suite.model.units import fmt_time, geomean_abs


def validate(fit_on: Sequence[dict], check: Sequence[dict], debug_text: str = "", one_machine: bool = False) -> dict:
    """Fit the links on ``fit_on``, predict every (op, size) of each ``check`` run at its topology with the
    backend's algorithm, and compare with what it measured; per op the geomean |error| of all sizes and of
    the bandwidth-bound ones (ASTRA-sim's validation table). ``one_machine``: the check runs' hosts are
    containers of one machine (RunModel.one_machine)."""
    model = dataclasses.replace(fit_runs(fit_on, debug_text), one_machine=one_machine)
    rows = []
    for run in check:
        for p in collective_points(run):
            alg = model.choice(p.op, p.size_bytes).algorithm or "ring"
            pr = predict(p.op, alg, p.topo, model.links_for(p.op), p.size_bytes)
            if pr is None:
                continue
            rows.append(
                {
                    "op": p.op,
                    "size_bytes": p.size_bytes,
                    "ranks": p.topo.ranks,
                    "ranks_per_node": p.topo.ranks_per_node,
                    "algorithm": alg,
                    "predicted_us": pr.time_us,
                    "predicted_ci_us": pr.time_ci_us,
                    "measured_us": p.time_us,
                    "error": (pr.time_us - p.time_us) / p.time_us,
                    "bottleneck": pr.bottleneck,
                    "bandwidth_bound": pr.bandwidth_us >= BANDWIDTH_BOUND * p.time_us,
                }
            )
    summary = {}
    for op in OPS:
        mine = [r for r in rows if r["op"] == op]
        if not mine:
            continue
        bw = [r["error"] for r in mine if r["bandwidth_bound"]]
        summary[op] = {
            "geomean_abs_error": geomean_abs([r["error"] for r in mine]),
            "geomean_abs_error_bandwidth_bound": geomean_abs(bw),
            "n": len(mine),
            "n_bandwidth_bound": len(bw),
        }
    everywhere = check_algorithms([p for r in [*fit_on, *check] for p in collective_points(r)], model.p2p)
    return {
        "fit_ranks": sorted({p.topo.ranks for p in model.points}),
        "check_all_runs": everywhere,
        "links": {op: {c: lk.as_dict() for c, lk in ls.items()} for op, ls in model.op_links.items()},
        "algorithms": {op: dataclasses.asdict(model.choice(op, 0)) for op in OPS},
        "rows": rows,
        "summary": summary,
        **step.validation(model, check),
        "target_bandwidth_bound": TARGET,
        "one_machine": one_machine,
    }


TARGET = 0.10
"""Geomean |error| the bandwidth-bound sizes of all_reduce, all_gather, reduce_scatter and broadcast aim at."""
TARGET_OPS = tuple(f.name for f in op_table.MODELLED if f.model.target)
"""The ops held to TARGET (the op table's ``Model.target``, suite/op_table.py)."""


def format_validation(v: dict) -> str:
    out = [
        f"# fitted on {'/'.join(map(str, v['fit_ranks']))} ranks; predicted with the backend's algorithm "
        f"(error = predicted / measured − 1; bandwidth-bound: the model's β part is >= "
        f"{100 * BANDWIDTH_BOUND:z.0f}% of the measured time)"
    ]
    for op, a in v["algorithms"].items():
        out.append(f"#   {op}: {a['algorithm']} — on the fit runs: {a['check'] or a['how']}")
        if op in v.get("check_all_runs", {}):
            out.append(f"#   {' ' * len(op)}  on every run: {v['check_all_runs'][op]}")
    head = f"{'op':<15}{'ranks':>6}{'size':>8}  {'algorithm':<16}{'predicted':>11}{'measured':>11}{'error':>9}  bound"
    out += [head, "-" * len(head)]
    for r in sorted(v["rows"], key=lambda r: (OPS.index(r["op"]), r["ranks"], r["size_bytes"])):
        bound = "bandwidth-bound" if r["bandwidth_bound"] else "latency-bound"
        miss = "" if r["bandwidth_bound"] or abs(r["error"]) <= TARGET else "  (model misses)"
        out.append(
            f"{r['op']:<15}{r['ranks']:>6}{metrics.format_size(r['size_bytes']) if r['size_bytes'] else '-':>8}"
            f"  {r['algorithm']:<16}{fmt_time(r['predicted_us']):>11}{fmt_time(r['measured_us']):>11}"
            f"{100 * r['error']:>+z8.1f}%  {bound}{miss}"
        )
    out += [
        "",
        f"{'op':<15}{'geomean |err| all':>18}{'bandwidth-bound':>17}  target ≤ {100 * TARGET:z.0f}% (bandwidth-bound)",
    ]
    for op, s in v["summary"].items():
        g, gb = s["geomean_abs_error"], s["geomean_abs_error_bandwidth_bound"]
        verdict = (
            ""
            if op not in TARGET_OPS
            else ("  no bandwidth-bound size" if gb is None else "  met" if gb <= TARGET else "  MISSED")
        )
        out.append(
            f"{op:<15}{100 * g:>z17.1f}%{(f'{100 * gb:z.1f}%' if gb is not None else '-'):>17}"
            f"  ({s['n_bandwidth_bound']}/{s['n']} sizes){verdict}"
        )
    out += step.validation_lines(v)
    return "\n".join(out) + "\n"


def verdict_line(v: dict) -> str:
    """Whether the predictions hold, in one line: per op of TARGET_OPS its bandwidth-bound sizes' geomean
    |error| against TARGET, then the latency-bound sizes' (not held to it) and each step model's."""
    held, missed = [], []
    for op in TARGET_OPS:
        g = (v["summary"].get(op) or {}).get("geomean_abs_error_bandwidth_bound")
        if g is not None:
            (held if g <= TARGET else missed).append(f"{op} {100 * g:z.1f}%")
    target = f"the ±{100 * TARGET:z.0f}% target"
    if missed:
        out = f"Predictions miss {target}: bandwidth-bound sizes of {', '.join(missed)} (geomean |error|)"
        out += f"; within it: {', '.join(held)}" if held else ""
    elif held:
        out = f"Predictions hold: bandwidth-bound sizes of {', '.join(held)} (geomean |error|), within {target}"
    else:
        out = f"Nothing here to hold to {target}: no size of these runs is bandwidth-bound"
    loose = geomean_abs([r["error"] for r in v["rows"] if not r["bandwidth_bound"]])
    if loose is not None:
        out += f"; latency-bound sizes (not held to it): {100 * loose:z.0f}%"
    steps = [f"{k[: -len('_summary')]} step {100 * s['geomean_abs_error']:z.0f}%" for k, s in v.items()
             if k.endswith("_summary") and s]  # fmt: skip
    return out + (f"; training steps: {', '.join(steps)}" if steps else "") + "."
