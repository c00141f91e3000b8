"""Text tables: an experiment's own (its spec's ``table``, e.g. ``experiments/<name>/table.py``) for the
records whose ``experiment`` field names it, else a generic table per op; and the parts they share
(the nccl-tests layout of a collective, pivots, cells). Formatters read records only; they never measure.
"""

import os
from collections import OrderedDict
from collections.abc import Callable

from suite import registry, results
from suite.metrics import format_number


def wrong(rec: dict | None) -> int:
    """Wrong elements of a record; 0 for a record that had nothing to check (``checked: false``)."""
    return (rec or {}).get("n_wrong") or 0


def wrong_cell(rec: dict, width: int = 6) -> str:
    """The #wrong column: the count, or "-" for an unchecked case (never a silent 0)."""
    if rec.get("checked", True) is False or rec.get("n_wrong") is None:
        return f"{'-':>{width}}"
    return f"{rec['n_wrong']:>{width}d}"


def num(v, fmt: str, width: int) -> str:
    """A number in a table, or "-" where the record has none (e.g. no bus bandwidth)."""
    return f"{'-':>{width}}" if v is None else format_number(v, f"{width}{fmt}")


def tail_cell(rec: dict, key: str, fmt, width: int, scale: float = 1.0) -> str:
    """A tail percentile (``p95_us``, ...) divided by ``scale``, or ``n=K`` where the record's K samples are
    too few for it (suite.metrics.tail_min_samples: p95 needs 20, p99 100). ``fmt``: a format spec
    (``'.1f'``), or a function of the value that writes it (``metrics.format_time_us``)."""
    v = results.tail_us(rec, key)
    if v is None:
        return f"{'n=' + str(results.n_samples(rec)):>{width}}"
    return f"{fmt(v / scale):>{width}}" if callable(fmt) else format_number(v / scale, f"{width}{fmt}")


DTYPE_NCCL_TESTS = {
    "float32": "float",
    "float64": "double",
    "float16": "half",
    "bfloat16": "bfloat16",
    "int32": "int32",
    "int64": "int64",
}
"""Type names as nccl-tests prints them (the collectives table imitates its layout)."""
DTYPE_SHORT = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int32": "i32",
    "int64": "i64",
    "none": "-",
}


def pivot(
    title: str,
    recs: list[dict],
    col,
    row=lambda r: (r["op"], r["size_bytes"], r["dtype"]),
    notes: tuple[str, ...] = (),
    op_width: int = 12,
    footer: str = "",
    ratio_cell: Callable[[dict, dict, str], str] | None = None,
    ratio_width: int = 10,
) -> str:
    """One comparison pivoted into columns: rows by ``row(rec)`` = (op, size, dtype), columns by
    ``col(rec)``, each with time (µs) and busbw (GB/s), then each column's time relative to the
    first ("x first": > 1 is slower). ``ratio_cell(rec, first_rec, first_col)``: that cell's text instead
    (e.g. the ratio with its interval, as the record states it), ``ratio_width`` wide."""
    cols = list(OrderedDict.fromkeys(col(r) for r in recs))
    lines = [f"# {title}", *(f"# {n}" for n in notes)]
    w, rw = op_width, ratio_width
    lines.append(
        f"#{'op':>{w}} {'size(B)':>9} {'type':>5}"
        + "".join(f" {c[:19]:>19}" for c in cols)
        + "".join(f" {'x first':>{rw}}" for _ in cols[1:])
    )
    lines.append(
        f"#{'':>{w}} {'':>9} {'':>5}"
        + "".join(f" {'time(us)':>10} {'busbw':>8}" for _ in cols)
        + "".join(f" {c[:rw]:>{rw}}" for c in cols[1:])
    )
    table: OrderedDict = OrderedDict()
    for r in recs:
        table.setdefault(row(r), {})[col(r)] = r
    n_wrong = 0
    for (op, size, dtype), by in table.items():
        cells = []
        for c in cols:
            r = by.get(c)
            cells.append(f" {r['time_us']:z10.1f} {num(r['busbw_gbps'], '.3f', 8)}" if r else f" {'-':>10} {'-':>8}")
            n_wrong += wrong(r)
        first = by.get(cols[0])
        for c in cols[1:]:
            r = by.get(c)
            if not (r and first and first["time_us"] > 0):
                cells.append(f" {'-':>{rw}}")
            elif ratio_cell is not None:
                cells.append(f" {ratio_cell(r, first, cols[0]):>{rw}}")
            else:
                cells.append(f" {r['time_us'] / first['time_us']:z{rw}.2f}")
        lines.append(f" {op[:w]:>{w}} {size:>9} {DTYPE_SHORT.get(dtype, dtype):>5}" + "".join(cells))
    lines.append(f"# {footer}#wrong total: {n_wrong} [{'OK' if n_wrong == 0 else 'FAILED'}]")
    return "\n".join(lines) + "\n"


# --- the run-time text tables (rank 0 prints them; `python -m suite.report RUN` too) ---------------


def _cell(rec: dict | None) -> str:
    if rec is None:
        return f"{'-':>9} {'-':>7} {'-':>7} {'-':>6}"
    return f"{rec['time_us']:z9.1f} {rec['algbw_gbps']:z7.3f} {num(rec['busbw_gbps'], '.3f', 7)} {wrong_cell(rec)}"


def iters_label(recs: list[dict]) -> str:
    """``20 iters``, or the range when the cases differ (``10-20 iters, BUDGET_S 1 s``: the budget cut some;
    ``20-960 iters, PRECISION loop``: precision mode sampled until its target or its time cap)."""
    counts = sorted({r["iterations"] for r in recs})
    if len(counts) == 1:
        return f"{counts[0]} iters"
    budgets = sorted({r["budget_s"] for r in recs if r.get("stopped_by_budget")})
    why = f", BUDGET_S {budgets[0]:zg} s" if len(budgets) == 1 else ""
    if any("precision_reached" in r for r in recs):
        why = ", PRECISION loop"
    return f"{counts[0]}-{counts[-1]} iters{why}"


def precision_missed(recs: list[dict]) -> list[dict]:
    """The records of precision mode whose median did not reach the target before MAX_TIME_S."""
    return [r for r in recs if r.get("precision_reached") is False]


def precision_footer(recs: list[dict]) -> str:
    """A table's line naming the cases that missed the precision target (empty when none did), loosest first."""
    missed = precision_missed(recs)
    if not missed:
        return ""
    worst = sorted(missed, key=lambda r: -(results.median_ci_pct(r) or 0.0))
    named = ", ".join(f"{r.get('label') or r['op']} {_pct(results.median_ci_pct(r))}" for r in worst[:5])
    more = f", {len(missed) - 5} more" if len(missed) > 5 else ""
    n = sum(1 for r in recs if "precision_reached" in r)
    return f"# PRECISION target missed by {len(missed)} of {n} cases (the time cap ended them): {named}{more}\n"


def _pct(ci: float | None) -> str:
    return "±?" if ci is None else f"±{ci:z.1f}%"


def collective_table(recs: list[dict]) -> str:
    """One nccl-tests table (out-of-place | in-place columns) for one op variant."""
    first = recs[0]
    title = first.get("variant", first["op"])
    if first.get("function") and first["function"] != title:
        title += f" (torch.distributed.{first['function']})"
    ranks = f"{first['world_size']} ranks"
    if first.get("groups"):  # a case on a partition of the world: every part at once (suite/ops/sweep.py)
        title += f" on the {first.get('group')} groups {' '.join(map(str, first['groups']))}"
        ranks += " per group"
    lines = [
        f"# {title}  ({first['backend']}, {first['device']}, {ranks}, timing={first['timing_mode']}, "
        f"{iters_label(recs)})",
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
        lines.append(
            f" {size:>11} {count:>12} {DTYPE_NCCL_TESTS.get(dtype, dtype):>8} {redop:>7} {root:>5}"
            f" {_cell(pair.get(False))}  {_cell(pair.get(True))}"
        )
    bus = [r["busbw_gbps"] for r in recs if r["size_bytes"] > 0]
    n_wrong = sum(wrong(r) for r in recs)
    if bus:
        lines.append(
            f"# Avg bus bandwidth : {sum(bus) / len(bus):z.4f} GB/s   "
            f"#wrong total: {n_wrong} [{'OK' if n_wrong == 0 else 'FAILED'}]"
        )
    return "\n".join(line.rstrip() for line in lines) + "\n"


def fit_labels(labels: list[str], width: int) -> list[str]:
    """The labels, each in at most ``width`` characters, told apart as far as they can be: a label too long
    loses its start ('…' in its place), which it shares with the other long ones, and keeps its end, where
    the rows differ (``…-64B-pass1``, ``…-4096B-oop``); where even the part after the start they share is
    too long, that part keeps its own start and end."""
    long = [label for label in labels if len(label) > width]
    shared = len(os.path.commonprefix(long)) if len(long) > 1 else width  # a lone long label: its end
    out = []
    for label in labels:
        rest = label[shared:]
        if len(label) <= width:
            out.append(label)
        elif len(rest) < width:
            out.append("…" + label[len(label) - width + 1 :])
        else:
            lead = "…" if shared else ""
            head = (width - 1 - len(lead)) // 2
            out.append(lead + rest[:head] + "…" + rest[len(rest) - (width - 1 - len(lead) - head) :])
    return out


def generic_table(title: str, recs: list[dict]) -> str:
    """A compact table for experiments without a dedicated formatter."""
    lines = [
        f"# {title}",
        f"#{'case':>34} {'size(B)':>11} {'type':>8} {'time(us)':>10} {'p95(us)':>10}"
        f" {'algbw':>8} {'busbw':>8} {'#wrong':>6}",
    ]
    labels = fit_labels([str(r.get("label") or r["op"]) for r in recs], 34)
    for r, label in zip(recs, labels):
        lines.append(
            f" {label:>34} {r['size_bytes']:>11} {DTYPE_NCCL_TESTS.get(r['dtype'], r['dtype']):>8}"
            f" {r['time_us']:z10.1f} {tail_cell(r, 'p95_us', '.1f', 10)} {r['algbw_gbps']:z8.3f}"
            f" {num(r['busbw_gbps'], '.3f', 8)}"
            f" {wrong_cell(r)}"
        )
    return "\n".join(lines) + "\n"


def formatter(experiment: str):
    """The experiment's own ``table(recs)`` (its spec's), if it has one."""
    spec = registry.spec(experiment)
    return None if spec is None else spec.table


def by_table(recs: list[dict]) -> OrderedDict:
    """Records grouped as the generic tables show them: by ``table``, else ``variant``, else ``op``."""
    groups: OrderedDict = OrderedDict()
    for r in recs:
        groups.setdefault(r.get("table") or r.get("variant") or r["op"], []).append(r)
    return groups


def format_tables(recs: list[dict]) -> str:
    """Every table for a list of records: per experiment, its own formatter (its spec's ``table``)
    or a generic table per op/``table`` key."""
    by_exp: OrderedDict = OrderedDict()
    for r in recs:  # the oversubscribed pass's records apart, headed (suite.results.oversubscribed)
        by_exp.setdefault((r["experiment"], results.oversubscribed(r)), []).append(r)
    out = []
    for (experiment, over), ers in by_exp.items():
        if over:
            out.append(f"# {experiment}: {results.OVERSUBSCRIBED_NOTE}")
        fmt = formatter(experiment)
        if fmt is not None:
            try:
                out.append(fmt(ers) + precision_footer(ers))
                continue
            except (KeyError, ValueError, TypeError, ZeroDivisionError) as e:
                # Records from another version of the experiment (or hand-made ones) may lack
                # fields its formatter needs: show them generically rather than not at all.
                out.append(
                    f"# {experiment}: its table formatter could not read these records "
                    f"({type(e).__name__}: {e}); generic table follows\n"
                )
        for table, rs in by_table(ers).items():
            out.append(generic_table(f"{experiment}: {table}", rs))
        out[-1] += precision_footer(ers)
    return "\n".join(out)
