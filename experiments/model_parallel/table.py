"""Tables of the ``model_parallel`` experiment: the split layer against the data-parallel step, and the
pipeline's two schedules, measured against their models.

Split layer: ``bytes`` is what the op moves per call: the whole weight for ``scatter`` and
``dp_train_step`` (its gradient all_reduce), the whole output B·out for the split
forward and ``mp_train_step``; busbw uses the factor of the op's collective. The split forward and
the train steps time their compute too, so they have no busbw: their record carries
``effective_busbw_gbps`` (the same factor over a time that includes compute), shown in the busbw
column with a trailing ``*``. The train steps'
check rule (exact, or the derived float32 tolerance) is printed under the table.

Pipeline: one row per schedule and micro-batch count M: the measured time T and the time its
schedule's model gives at this run's measured c (pipeline_compute) and τ (pipeline_transfer), and the
bubble 1 − M·c/T of the measurement, of the model and of the compute-only ideal (τ = 0) — one
definition, so the three columns are comparable. c and τ are each sampled as M + S − 1 of them back to
back (``stage_repeats``), as long as the longest schedule's samples, so that they meet the same
interruptions as T. ``meas/model`` ends in ``!`` where the model does not hold for the run (the
record's ``model_holds``: T within ±25% of the model), and a line under the table names them.
"""

from __future__ import annotations

from suite.api import Clause, metrics, num, tail_cell, wrong, wrong_cell


def _busbw_cell(r: dict) -> str:
    """busbw, or the effective rate of a record whose time includes compute, marked ``*``."""
    eff = r.get("effective_busbw_gbps")
    return num(r["busbw_gbps"], ".3f", 8) if eff is None else f"{eff:z7.3f}*"


def _split_table(records: list[dict]) -> list[str]:
    first = records[0]
    lines = [
        f"# model_parallel: Linear({first.get('in_features')}, {first.get('out_features')}) split by output rows "
        f"over {first['world_size']} ranks, global batch {first.get('global_batch')}, {first['backend']}, "
        f"{first['device']}, timing={first['timing_mode']}, {first['iterations']} iters",
        f"#{'case':>24} {'bytes':>11} {'time':>9} {'p95':>9} {'samples/s':>10} {'algbw':>8} {'busbw':>8} {'#wrong':>6}",
        f"#{'':>24} {'(B)':>11} {'(ms)':>9} {'(ms)':>9} {'':>10} {'(GB/s)':>8} {'(GB/s)':>8} {'':>6}",
    ]
    for r in records:
        sps = r.get("samples_per_s")
        lines.append(
            f" {r['op'][:24]:>24} {r['size_bytes']:>11} {r['p50_us'] / 1e3:z9.3f}"
            f" {tail_cell(r, 'p95_us', '.3f', 9, 1e3)}"
            f" {(f'{sps:z10.0f}' if sps else f'{chr(45):>10}')} {r['algbw_gbps']:z8.3f} {_busbw_cell(r)}"
            f" {wrong_cell(r)}"
        )
    for r in records:
        if "check_exact" in r:
            tol = "" if r["check_exact"] else f" (largest tolerance {r.get('check_max_tolerance', 0):z.3g})"
            lines.append(f"# check {r['op']}: {r['check']}{tol}")
    return lines


def _ms(us) -> str:
    return num(None if us is None else us / 1e3, ".3f", 9)


def _pipeline_table(records: list[dict]) -> list[str]:
    by_op = {r["op"]: r for r in records}
    runs = sorted(
        (r for r in records if "schedule" in r), key=lambda r: (r["schedule"] != "blocking", r["microbatches"])
    )
    first = records[0]
    lines = [
        f"# pipeline: {first['stages']} stages (rank i -> i+1), stage = {first['stage_features']}x"
        f"{first['stage_features']} matmul on {first['microbatch_rows']}-row micro-batches "
        f"({first['microbatch_bytes']} B), {first['backend']}, {first['device']}, {first['iterations']} iters"
    ]
    comp, hop = by_op.get("pipeline_compute"), by_op.get("pipeline_transfer")
    c = runs[0]["stage_compute_us"] if runs else (comp or {}).get("time_us")
    tau = runs[0]["transfer_us"] if runs else (hop or {}).get("time_us")
    lines.append(
        f"# measured alone in this run: c = {_ms(c).strip()} ms compute per micro-batch per stage "
        f"(pipeline_compute), tau = {_ms(tau).strip()} ms per hop (pipeline_transfer)"
    )
    for schedule in dict.fromkeys(r["schedule"] for r in runs):
        model = next(r["model"] for r in runs if r["schedule"] == schedule)
        lines.append(f"# {schedule}: {model}")
    lines += [
        "# bubble = 1 - M*c/T (share of T a stage does not compute), one definition for measured, "
        "modelled and ideal (tau = 0: (S-1)/(M+S-1))",
        f"#{'schedule':>9} {'M':>3} {'T meas':>9} {'T model':>9} {'meas/':>7} {'bubble':>7} {'bubble':>7}"
        f" {'bubble':>7} {'#wrong':>6}",
        f"#{'':>9} {'':>3} {'(ms)':>9} {'(ms)':>9} {'model':>7} {'meas':>7} {'model':>7} {'ideal':>7} {'':>6}",
    ]
    for r in runs:
        ratio = r.get("time_over_model")
        ratio_cell = num(ratio, ".2f", 7) if r.get("model_holds", True) else f"{num(ratio, '.2f', 6).strip():>6}!"
        lines.append(
            f" {r['schedule']:>9} {r['microbatches']:>3} {_ms(r['time_us'])} {_ms(r.get('model_time_us'))}"
            f" {ratio_cell} {num(r.get('bubble'), '.3f', 7)} {num(r.get('model_bubble'), '.3f', 7)}"
            f" {num(r.get('ideal_bubble'), '.3f', 7)} {wrong_cell(r)}"
        )
    off = [f"{r['schedule']} M={r['microbatches']}" for r in runs if r.get("model_holds") is False]
    if off:
        lines.append(
            f"# ! model does not hold (model_holds: false, T too far from it): {', '.join(off)}; "
            "its model bubble is not this run's"
        )
    for r in (comp, hop):
        if r is not None:
            lines.append(
                f"# {r['op']}: {_ms(r['time_us']).strip()} ms (p95 {tail_cell(r, 'p95_us', '.3f', 0, 1e3)}), #wrong "
                f"{wrong_cell(r).strip()}"
            )
    return lines


def format_tables(records: list[dict]) -> str:
    split = [r for r in records if r.get("table") != "pipeline"]
    pipe = [r for r in records if r.get("table") == "pipeline"]
    lines = (_split_table(split) if split else []) + (_pipeline_table(pipe) if pipe else [])
    n_wrong = sum(wrong(r) for r in records)
    lines.append(f"# #wrong total: {n_wrong} [{'OK' if n_wrong == 0 else 'FAILED'}]")
    return "\n".join(lines) + "\n"


def headline(run: dict, recs: list[dict]) -> Clause | None:
    """The split layer's train step against the data-parallel one, and the pipeline's measured bubble at its
    most micro-batches."""
    by_op = {r["op"]: r for r in recs}
    t = metrics.format_time_us
    said, numbers = [], {}
    mp, dp = by_op.get("mp_train_step"), by_op.get("dp_train_step")
    if mp is not None:
        layer = f"Linear({mp.get('in_features')}, {mp.get('out_features')})"
        said.append(
            f"the {layer} split over ranks trains a step in {t(mp['time_us'])}"
            + (f" against {t(dp['time_us'])} data-parallel" if dp is not None else "")
        )
        numbers["mp_step_us"] = mp["time_us"]
    pipe = [r for r in recs if r.get("table") == "pipeline" and r.get("bubble") is not None]
    if pipe:
        most = max(p["microbatches"] for p in pipe)
        r = min((r for r in pipe if r["microbatches"] == most), key=lambda r: r["time_us"])
        said.append(
            f"a {r['stages']}-stage pipeline of {r['microbatches']} micro-batches idles {r['bubble']:z.0%} "
            f"of {t(r['time_us'])} ({r['schedule']} schedule, bubble = 1 - M*c/T)"
        )
        numbers["bubble"] = r["bubble"]
    return Clause(text="; ".join(said), numbers=numbers) if said else None
