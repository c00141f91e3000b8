"""recovery: one row per fault schedule and checkpoint mode; detect is fault -> the first rank that saw it,
recover is fault -> the first step committed after the restart (both averaged over the faults), redone the steps
trained twice, ETTR productive time (steps x the fault-free step) over the job's wall time, exact whether the
final state and the state at every restore and commit equal the fault-free run's bit for bit. Below each row,
its timeline: per rank of the job, each fault, detection and recovery, in seconds from the job's launch. Where a
case ran more than once (RECOVERY_REPEATS), a last table gives, per strategy, fault and checkpoint mode, the median
and the range (smallest-largest) over its runs of detect, recover and ETTR, and how many runs were exact."""

from __future__ import annotations

import math
import statistics

from suite.api import num


def format_tables(records: list[dict]) -> str:
    lines = [
        "# recovery: torchrun elastic restarts from torch.distributed.checkpoint (elastic), live recovery (torchft)",
        f"#{'strategy':>8} {'fault':>14} {'ckpt':>5} {'detect(s)':>9} {'recover(s)':>10} {'redone':>6} {'save(s)':>8} "
        f"{'load(s)':>8} {'wall(s)':>8} {'ETTR':>7} {'exact':>5}",
    ]
    for r in records:
        lines.append(
            f" {r.get('strategy', '?'):>8} {r.get('fault', '?'):>14} {r.get('ckpt_mode', '?'):>5} "
            f"{num(r.get('t_detect'), '.3f', 9)} "
            f"{num(r.get('t_recover'), '.2f', 10)} {num(r.get('steps_redone'), 'd', 6)} "
            f"{num(r.get('ckpt_save_s'), '.3f', 8)} {num(r.get('ckpt_load_s'), '.3f', 8)} "
            f"{num(r.get('wall_s'), '.1f', 8)} {num(r.get('ettr'), '.4f', 7)} {'yes' if r.get('exact') else 'NO':>5}"
        )
        if r.get("wrong"):
            lines.append(f"#   {r['wrong']}")
        lines += timeline_lines(r.get("events") or [])
    return "\n".join(lines + spread_lines(records)) + "\n"


def spread(values: list, fmt: str) -> str:
    """``median (smallest-largest)`` of the finite numbers among ``values`` (a run that measured none, e.g. a
    torchft replica that never detected, leaves None or nan); ``-`` where there is none."""
    v = sorted(x for x in values if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x))
    if not v:
        return "-"
    return f"{statistics.median(v):z{fmt}}" + ("" if len(v) == 1 else f" ({v[0]:z{fmt}}-{v[-1]:z{fmt}})")


def spread_lines(records: list[dict]) -> list[str]:
    """The spread over repeats: one row per strategy, fault and checkpoint mode that ran more than once."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r.get("strategy", "?"), r.get("fault", "?"), r.get("ckpt_mode", "?")), []).append(r)
    if all(len(g) < 2 for g in groups.values()):
        return []
    out = [
        "# spread over repeats: median (smallest-largest) over the runs of each strategy, fault and checkpoint mode",
        f"#{'strategy':>8} {'fault':>14} {'ckpt':>5} {'runs':>4} {'detect(s)':>21} {'recover(s)':>21} "
        f"{'ETTR':>24} {'exact':>5}",
    ]
    for (strategy, fault, mode), rs in groups.items():
        exact = sum(bool(r.get("exact")) for r in rs)
        out.append(
            f" {strategy:>8} {fault:>14} {mode:>5} {len(rs):>4} {spread([r.get('t_detect') for r in rs], '.3f'):>21} "
            f"{spread([r.get('t_recover') for r in rs], '.2f'):>21} {spread([r.get('ettr') for r in rs], '.4f'):>24} "
            f"{f'{exact}/{len(rs)}':>5}"
        )
    return out


def timeline_lines(events: list[dict]) -> list[str]:
    """Per rank: its faults, detections and recoveries (not its commits), with their times and steps."""
    out = []
    for rank in sorted({e["rank"] for e in events}):
        marks = [
            f"{e['kind']} {e['t']:z.2f}s"
            + (f" (step {e['step']})" if e.get("step") is not None else "")
            + (" (restart)" if e.get("struck") == "restart" else "")
            for e in events
            if e["rank"] == rank and e["kind"] != "commit"
        ]
        if marks:
            out.append(f"#   rank {rank}: " + ", ".join(marks))
    return out
