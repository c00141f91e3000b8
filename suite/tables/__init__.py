"""Per-experiment text tables: ``suite/tables/<experiment>.py`` defines
``format_tables(records) -> str`` for the records whose ``experiment`` field
matches the module name. ``suite.report.format_tables`` dispatches here and
falls back to a generic table. Formatters read records only; they never measure.
"""

from collections import OrderedDict


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
    return f"{'-':>{width}}" if v is None else f"{v:{width}{fmt}}"

DTYPE_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int32": "i32",
          "int64": "i64", "none": "-"}


def pivot(title: str, recs: list[dict], col, row=lambda r: (r["op"], r["size_bytes"], r["dtype"]),
          notes: tuple[str, ...] = (), op_width: int = 12, footer: str = "") -> str:
    """One comparison pivoted into columns: rows by ``row(rec)`` = (op, size, dtype), columns by
    ``col(rec)``, each with time (µs) and busbw (GB/s), then each column's time relative to the
    first ("x first": > 1 is slower)."""
    cols = list(OrderedDict.fromkeys(col(r) for r in recs))
    lines = [f"# {title}", *(f"# {n}" for n in notes)]
    w = op_width
    lines.append(f"#{'op':>{w}} {'size(B)':>9} {'type':>5}" + "".join(f" {c[:19]:>19}" for c in cols)
                 + "".join(f" {'x first':>10}" for _ in cols[1:]))
    lines.append(f"#{'':>{w}} {'':>9} {'':>5}" + "".join(f" {'time(us)':>10} {'busbw':>8}" for _ in cols)
                 + "".join(f" {c[:10]:>10}" for c in cols[1:]))
    table: OrderedDict = OrderedDict()
    for r in recs:
        table.setdefault(row(r), {})[col(r)] = r
    n_wrong = 0
    for (op, size, dtype), by in table.items():
        cells = []
        for c in cols:
            r = by.get(c)
            cells.append(f" {r['time_us']:10.1f} {num(r['busbw_gbps'], '.3f', 8)}" if r else f" {'-':>10} {'-':>8}")
            n_wrong += wrong(r)
        first = by.get(cols[0])
        for c in cols[1:]:
            r = by.get(c)
            cells.append(f" {r['time_us'] / first['time_us']:10.2f}" if r and first and first["time_us"] > 0
                         else f" {'-':>10}")
        lines.append(f" {op[:w]:>{w}} {size:>9} {DTYPE_SHORT.get(dtype, dtype):>5}" + "".join(cells))
    lines.append(f"# {footer}#wrong total: {n_wrong} [{'OK' if n_wrong == 0 else 'FAILED'}]")
    return "\n".join(lines) + "\n"
