"""Text reports from stored records: nccl-tests-style tables.

Reads only records (the ``extra_info`` of a stored run); never measures.
``python -m suite.report results/latest`` prints the tables of a saved run.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections import OrderedDict

from suite import results

_DTYPE_SHORT = {"float32": "float", "float64": "double", "float16": "half", "bfloat16": "bfloat16",
                "int32": "int32", "int64": "int64"}


def _cell(rec: dict | None) -> str:
    if rec is None:
        return f"{'-':>9} {'-':>7} {'-':>7} {'-':>6}"
    return (f"{rec['time_us']:9.1f} {rec['algbw_gbps']:7.3f} {rec['busbw_gbps']:7.3f} "
            f"{rec['n_wrong']:>6d}")


def collective_table(recs: list[dict]) -> str:
    """One nccl-tests table (out-of-place | in-place columns) for one op variant."""
    first = recs[0]
    title = first.get("variant", first["op"])
    if first.get("function") and first["function"] != title:
        title += f" (torch.distributed.{first['function']})"
    ranks = first["world_size"]
    lines = [
        f"# {title}  ({first['backend']}, {first['device']}, {ranks} ranks, timing={first['timing_mode']}, "
        f"{first['iterations']} iters)",
        f"#{'':47}{'out-of-place':^33}  {'in-place':^32}",
        f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>7} {'root':>5}"
        f" {'time':>9} {'algbw':>7} {'busbw':>7} {'#wrong':>6}  {'time':>9} {'algbw':>7} {'busbw':>7} {'#wrong':>6}",
        f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>7} {'':>5}"
        f" {'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7} {'':>6}  {'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7} {'':>6}",
    ]
    rows: OrderedDict = OrderedDict()
    for r in recs:
        key = (r["size_bytes"], r["count"], r["dtype"], r.get("redop") or "none", r.get("root", -1))
        rows.setdefault(key, {})[bool(r["in_place"])] = r
    for (size, count, dtype, redop, root), pair in rows.items():
        lines.append(f" {size:>11} {count:>12} {_DTYPE_SHORT.get(dtype, dtype):>8} {redop:>7} {root:>5}"
                     f" {_cell(pair.get(False))}  {_cell(pair.get(True))}")
    bus = [r["busbw_gbps"] for r in recs if r["size_bytes"] > 0]
    wrong = sum(r["n_wrong"] for r in recs)
    if bus:
        lines.append(f"# Avg bus bandwidth : {sum(bus) / len(bus):.4f} GB/s   "
                     f"#wrong total: {wrong} [{'OK' if wrong == 0 else 'FAILED'}]")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def generic_table(title: str, recs: list[dict]) -> str:
    """A compact table for experiments without a dedicated formatter."""
    lines = [f"# {title}",
             f"#{'case':>34} {'size(B)':>11} {'type':>8} {'time(us)':>10} {'p95(us)':>10}"
             f" {'algbw':>8} {'busbw':>8} {'#wrong':>6}"]
    for r in recs:
        label = str(r.get("label") or r["op"])[:34]
        lines.append(f" {label:>34} {r['size_bytes']:>11} {_DTYPE_SHORT.get(r['dtype'], r['dtype']):>8}"
                     f" {r['time_us']:10.1f} {r['p95_us']:10.1f} {r['algbw_gbps']:8.3f} {r['busbw_gbps']:8.3f}"
                     f" {r['n_wrong']:>6d}")
    return "\n".join(lines) + "\n"


def _formatter(experiment: str):
    """``suite/tables/<experiment>.py``'s ``format_tables(recs)``, if the experiment has one."""
    if experiment == "collectives":
        return None
    try:
        mod = importlib.import_module(f"suite.tables.{experiment}")
    except ModuleNotFoundError:
        return None
    return getattr(mod, "format_tables", None)


def format_tables(recs: list[dict]) -> str:
    """Every table for a list of records: per experiment, its own formatter
    (``suite/tables/<experiment>.py``) or a generic table per op/``table`` key."""
    by_exp: OrderedDict = OrderedDict()
    for r in recs:
        by_exp.setdefault(r["experiment"], []).append(r)
    out = []
    for experiment, ers in by_exp.items():
        fmt = _formatter(experiment)
        if fmt is not None:
            out.append(fmt(ers))
            continue
        groups: OrderedDict = OrderedDict()
        for r in ers:
            groups.setdefault(r.get("table") or r.get("variant") or r["op"], []).append(r)
        for table, rs in groups.items():
            out.append(collective_table(rs) if experiment == "collectives" else generic_table(f"{experiment}: {table}", rs))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m suite.report", description=__doc__.splitlines()[0])
    ap.add_argument("run", help="results directory (e.g. results/latest) or bench.json")
    args = ap.parse_args(argv)
    try:
        run = results.load_run(args.run)
    except (OSError, ValueError) as e:
        print(f"error: cannot read run {args.run}: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(format_tables(results.records(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
