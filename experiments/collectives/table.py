"""One nccl-tests table per op variant (out-of-place | in-place columns)."""

from __future__ import annotations

from suite.api import by_table, collective_table


def format_tables(records: list[dict]) -> str:
    return "\n".join(collective_table(rs) for rs in by_table(records).values())
