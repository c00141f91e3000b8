"""recovery: one row per fault schedule and checkpoint mode; detect is fault -> the first rank that saw it,
recover is fault -> the first step committed after the restart (both averaged over the faults), redone the steps
trained twice, ETTR productive time (steps x the fault-free step) over the job's wall time, exact whether the
final state and the state at every restore and commit equal the fault-free run's bit for bit. Below each row,
its timeline: per rank of the job, each fault, detection and recovery, in seconds from the job's launch."""

from __future__ import annotations

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
    return "\n".join(lines) + "\n"


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
