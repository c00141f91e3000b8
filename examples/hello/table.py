"""hello: one row per all_reduce size; time is the median over samples of the slowest rank, busbw the
nccl-tests bus bandwidth (suite/metrics.py), #wrong the elements that differed from 1 + 2 + ... + n."""

from __future__ import annotations

from suite.api import num, wrong_cell


def format_tables(records: list[dict]) -> str:
    lines = ["# hello: all_reduce of rank + 1", f"#{'size(B)':>11} {'time(us)':>10} {'busbw':>8} {'#wrong':>6}"]
    for r in records:
        lines.append(f" {r['size_bytes']:>11} {r['time_us']:z10.1f} {num(r['busbw_gbps'], '.3f', 8)} {wrong_cell(r)}")
    return "\n".join(lines) + "\n"
