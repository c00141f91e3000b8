"""Tables of the ``ddp`` experiment: one comparison table per model, one for the initial broadcast.

Columns of the step table (all from stored records; see experiments/ddp.py for how each
is measured):

- step p50 / p95: step time percentiles over iterations (slowest rank per iteration), ms
- samples/s: global training throughput at the median step time
- scale eff: k·t(solo) / t(case), 1.0 = N ranks are N times as fast as one
- exposed: t(case) − k·t(no communication): communication the step waits for, ms
- comm / overlap: DDP logger's backward comm time and the part overlapping backward
  compute (ms, %); for the ``all_reduce`` row the timed all_reduce itself
- GB/s: effective all_reduce bus bandwidth of the gradient bytes over the whole step
- peak mem: high-water mark during the timed steps, MiB (CPU: peak RSS of the process)
"""

from __future__ import annotations

from suite.tables import num, wrong, wrong_cell

from collections import OrderedDict


def _f(v, fmt: str, width: int) -> str:
    if v is None:
        return f"{'-':>{width}}"
    return f"{v:{width}{fmt}}"


def _step_table(model: str, recs: list[dict]) -> str:
    first = recs[0]
    n_params = first.get("n_params", 0)
    grad = next((r["size_bytes"] for r in recs if r["size_bytes"]), 0)
    lines = [
        f"# ddp: {model} model ({n_params / 1e6:.2f}M params, {grad / 1e6:.2f} MB gradient/step), {first['backend']}, "
        f"{first['device']}, {first['world_size']} ranks, batch {first.get('batch_per_rank')}/rank, "
        f"timing={first['timing_mode']}, {first['iterations']} iters",
        f"#{'case':>30} {'step p50':>9} {'p95':>8} {'samples/s':>10} {'scale':>6} {'exposed':>8} {'comm':>8}"
        f" {'overlap':>8} {'GB/s':>7} {'peak mem':>9} {'#wrong':>6}",
        f"#{'':>30} {'(ms)':>9} {'(ms)':>8} {'':>10} {'eff.':>6} {'(ms)':>8} {'(ms)':>8}"
        f" {'(%)':>8} {'busbw':>7} {'(MiB)':>9} {'':>6}",
    ]
    for r in recs:
        peak = r.get("peak_mem_bytes")
        lines.append(
            f" {str(r.get('label', r['op']))[:30]:>30} {r['p50_us'] / 1e3:9.2f} {r['p95_us'] / 1e3:8.2f}"
            f" {_f(r.get('samples_per_s'), '.0f', 10)} {_f(r.get('scaling_efficiency'), '.2f', 6)}"
            f" {_f(r.get('comm_exposed_ms'), '.2f', 8)} {_f(r.get('comm_ms'), '.2f', 8)}"
            f" {_f(r.get('overlap_pct'), '.0f', 8)} {_f(r['busbw_gbps'] if r['size_bytes'] else None, '.3f', 7)}"
            f" {_f(peak / 2**20 if peak else None, '.0f', 9)} {wrong_cell(r)}")
    n_wrong = sum(wrong(r) for r in recs)
    lines.append(f"# #wrong: parameter elements differing from rank 0's after the timed steps, all ranks: "
                 f"{n_wrong} [{'OK' if n_wrong == 0 else 'FAILED'}]")
    return "\n".join(lines) + "\n"


def _init_table(model: str, recs: list[dict]) -> str:
    first = recs[0]
    lines = [f"# ddp: initial-state broadcast from rank 0, {model} model ({first['size_bytes']} B in "
             f"{first.get('n_tensors')} tensors), {first['backend']}, {first['world_size']} ranks",
             f"#{'case':>30} {'time':>9} {'p95':>9} {'algbw':>8} {'busbw':>8} {'#wrong':>6}",
             f"#{'':>30} {'(ms)':>9} {'(ms)':>9} {'(GB/s)':>8} {'(GB/s)':>8} {'':>6}"]
    for r in recs:
        lines.append(f" {str(r.get('label', r['op']))[:30]:>30} {r['p50_us'] / 1e3:9.3f} {r['p95_us'] / 1e3:9.3f}"
                     f" {r['algbw_gbps']:8.3f} {num(r['busbw_gbps'], '.3f', 8)} {wrong_cell(r)}")
    return "\n".join(lines) + "\n"


def format_tables(records: list[dict]) -> str:
    groups: OrderedDict = OrderedDict()
    for r in records:
        groups.setdefault((r.get("model", "?"), r["op"] in ("broadcast", "ddp_init")), []).append(r)
    out = []
    for (model, is_init), recs in groups.items():
        out.append(_init_table(model, recs) if is_init else _step_table(model, recs))
    return "\n".join(out)
