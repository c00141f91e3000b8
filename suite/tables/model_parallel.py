"""Table of the ``model_parallel`` experiment: the split layer against the data-parallel step.

``bytes`` is what the op moves per call: the whole weight for ``scatter`` and
``dp_train_step`` (its gradient all_reduce), the whole output B·out for the split
forward and ``mp_train_step``; busbw uses the factor of the op's collective.
"""

from __future__ import annotations

from suite.tables import num, wrong, wrong_cell


def format_tables(records: list[dict]) -> str:
    first = records[0]
    lines = [f"# model_parallel: Linear({first.get('in_features')}, {first.get('out_features')}) split by output rows "
             f"over {first['world_size']} ranks, global batch {first.get('global_batch')}, {first['backend']}, "
             f"{first['device']}, timing={first['timing_mode']}, {first['iterations']} iters",
             f"#{'case':>24} {'bytes':>11} {'time':>9} {'p95':>9} {'samples/s':>10} {'algbw':>8} {'busbw':>8} {'#wrong':>6}",
             f"#{'':>24} {'(B)':>11} {'(ms)':>9} {'(ms)':>9} {'':>10} {'(GB/s)':>8} {'(GB/s)':>8} {'':>6}"]
    for r in records:
        sps = r.get("samples_per_s")
        lines.append(f" {r['op'][:24]:>24} {r['size_bytes']:>11} {r['p50_us'] / 1e3:9.3f} {r['p95_us'] / 1e3:9.3f}"
                     f" {(f'{sps:10.0f}' if sps else f'{chr(45):>10}')} {r['algbw_gbps']:8.3f} {num(r['busbw_gbps'], '.3f', 8)}"
                     f" {wrong_cell(r)}")
    n_wrong = sum(wrong(r) for r in records)
    lines.append(f"# #wrong total: {n_wrong} [{'OK' if n_wrong == 0 else 'FAILED'}]")
    return "\n".join(lines) + "\n"
