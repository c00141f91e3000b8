"""Tables of the ``ddp`` experiment: one comparison table per model, one for the initial broadcast.

Columns of the step table (all from stored records; see experiments/ddp/cases.py for how each
is measured):

- step p50 / p95: step time percentiles over iterations (slowest rank per iteration), ms
- samples/s: global training throughput at the median step time
- scale eff: k·t(solo) / t(case), 1.0 = N ranks are N times as fast as one
- exposed: t(case) − k·t(no communication): communication the step waits for, ms
- +comm: t(case) − t(no-op hook): what communication adds to DDP's step, ms (measured overlap)
- saved / hid: t(no-op hook) + t(all_reduce alone) − t(case), ms, and that as % of the
  all_reduce alone: what overlapping communication with backward saved
- log comm / log ovl: DDP logger's interval statistics, median over the timed steps: backward
  comm time (first bucket ready → last all_reduce done), ms, and the % of it overlapping
  backward compute
- GB/s eff.: the gradient bytes all-reduced per step over the whole step's time (compute included),
  times the all_reduce bus factor: ``effective_busbw_gbps``, not nccl-tests busbw (the bare
  all_reduce row, which times communication alone, shows its busbw)
- bkts: buckets DDP built
- peak mem: high-water mark during the timed steps, MiB (CPU: peak RSS of the process)
- #wrong / check: elements differing from single-process training beyond the case's rule
  (``exact`` or ``tol``); ``-`` for a case that is not checked (the record says why)
"""

from __future__ import annotations

from collections import OrderedDict

from suite.api import Clause, fmt_bytes, metrics, num, tail_cell, wrong, wrong_cell


def _gbps(r: dict) -> float | None:
    """The step's effective bus bandwidth (its time includes compute), or a bare all_reduce's busbw."""
    return r.get("effective_busbw_gbps", r.get("busbw_gbps"))


def _check_cell(r: dict) -> str:
    if r.get("checked", True) is False:
        return "not checked"
    rule = r.get("check_rule")
    if rule is None:  # the gradient all_reduce alone and the initial broadcast: exact equality
        return "exact"
    return "exact" if rule == "exact" else f"tol {r.get('check_tol', 0):z.1e}"


def _step_table(model: str, recs: list[dict]) -> str:
    first = recs[0]
    n_params = first.get("n_params", 0)
    grad = first.get("grad_bytes") or next((r["size_bytes"] for r in recs if r["size_bytes"]), 0)
    lines = [
        f"# ddp: {model} model ({n_params / 1e6:z.2f}M params, {grad / 1e6:z.2f} MB gradient/step), "
        f"{first['backend']}, {first['device']}, {first['world_size']} ranks, "
        f"batch {first.get('batch_per_rank')}/rank, timing={first['timing_mode']}, {first['iterations']} iters",
        f"#{'case':>30} {'step p50':>9} {'p95':>8} {'samples/s':>10} {'scale':>6} {'exposed':>8} {'+comm':>7}"
        f" {'saved':>7} {'hid':>5} {'log comm':>9} {'log ovl':>8} {'GB/s':>7} {'bkts':>5} {'peak mem':>9}"
        f" {'#wrong':>6}  check",
        f"#{'':>30} {'(ms)':>9} {'(ms)':>8} {'':>10} {'eff.':>6} {'(ms)':>8} {'(ms)':>7}"
        f" {'(ms)':>7} {'(%)':>5} {'(ms)':>9} {'(%)':>8} {'eff.':>7} {'':>5} {'(MiB)':>9} {'':>6}",
    ]
    for r in recs:
        peak = r.get("peak_mem_bytes")
        lines.append(
            f" {str(r.get('label', r['op']))[:30]:>30} {r['p50_us'] / 1e3:z9.2f}"
            f" {tail_cell(r, 'p95_us', '.2f', 8, 1e3)}"
            f" {num(r.get('samples_per_s'), '.0f', 10)} {num(r.get('scaling_efficiency'), '.2f', 6)}"
            f" {num(r.get('comm_exposed_ms'), '.2f', 8)} {num(r.get('comm_added_ms'), '.2f', 7)}"
            f" {num(r.get('overlap_saved_ms'), '.2f', 7)} {num(r.get('overlap_saved_pct'), '.0f', 5)}"
            f" {num(r.get('ddp_logger_comm_ms'), '.2f', 9)} {num(r.get('ddp_logger_overlap_pct'), '.0f', 8)}"
            f" {num(_gbps(r) if r['size_bytes'] else None, '.3f', 7)} {num(r.get('n_buckets'), 'd', 5)}"
            f" {num(peak / 2**20 if peak else None, '.0f', 9)} {wrong_cell(r)}  {_check_cell(r)}"
        )
    n_wrong = sum(wrong(r) for r in recs)
    lines.append(
        f"# #wrong: parameter elements differing from single-process training on the global batches "
        f"beyond the case's rule, after the check step and the timed steps, all ranks: "
        f"{n_wrong} [{'OK' if n_wrong == 0 else 'FAILED'}]"
    )
    lines.append(
        "# +comm = t - t(no-op hook); saved = t(no-op hook) + t(all_reduce alone) - t; hid = saved / "
        "t(all_reduce alone); log comm/ovl: DDP logger intervals, timed steps only"
    )
    return "\n".join(lines) + "\n"


def _init_table(model: str, recs: list[dict]) -> str:
    first = recs[0]
    lines = [
        f"# ddp: initial-state broadcast from rank 0, {model} model ({first['size_bytes']} B in "
        f"{first.get('n_tensors')} tensors), {first['backend']}, {first['world_size']} ranks",
        f"#{'case':>30} {'time':>9} {'p95':>9} {'algbw':>8} {'busbw':>8} {'#wrong':>6}",
        f"#{'':>30} {'(ms)':>9} {'(ms)':>9} {'(GB/s)':>8} {'(GB/s)':>8} {'':>6}",
    ]
    for r in recs:
        lines.append(
            f" {str(r.get('label', r['op']))[:30]:>30} {r['p50_us'] / 1e3:z9.3f}"
            f" {tail_cell(r, 'p95_us', '.3f', 9, 1e3)}"
            f" {r['algbw_gbps']:z8.3f} {num(r['busbw_gbps'], '.3f', 8)} {wrong_cell(r)}"
        )
    return "\n".join(lines) + "\n"


def format_tables(records: list[dict]) -> str:
    groups: OrderedDict = OrderedDict()
    for r in records:
        groups.setdefault((r.get("model", "?"), r["op"] in ("broadcast", "ddp_init")), []).append(r)
    out = []
    for (model, is_init), recs in groups.items():
        out.append(_init_table(model, recs) if is_init else _step_table(model, recs))
    return "\n".join(out)


def headline(run: dict, recs: list[dict]) -> Clause | None:
    """The plain DDP step of the model with the largest gradient: its time against the same step without
    communication, and how much of its gradient all_reduce it hides."""
    steps = [r for r in recs if r.get("label") == "ddp" and r.get("local_step_ms") is not None]
    if not steps:
        return None
    r = max(steps, key=lambda r: r.get("grad_bytes") or 0)
    t = metrics.format_time_us
    text = (
        f"the DDP step of {r.get('model', r.get('table'))} ({fmt_bytes(r.get('grad_bytes'))} gradient) takes "
        f"{t(r['time_us'])} against {t(r['local_step_ms'] * 1e3)} without communication"
    )
    hid, alone = r.get("overlap_saved_pct"), r.get("allreduce_ms")
    if hid is not None and alone is not None:
        share = f"{hid:z.0f}%" if hid > 0 else "none"
        text += f"; it hides {share} of its {t(alone * 1e3)} gradient all_reduce (timed alone)"
    return Clause(text=text, numbers={"step_us": r["time_us"], "hidden_pct": hid, "grad_bytes": r.get("grad_bytes")})
