"""Table of the ``sharded`` experiment: one row per strategy (experiments/sharded/cases.py measures each).

Columns (all from stored records):

- step p50 / p95: time of one training step (forward, loss, backward, SGD step), slowest rank per step, ms
- S/step: S bytes (nccl-tests' size) of every collective one step issued (the inventory), KiB
- theory: the same from the model's shapes alone (experiments/sharded/inventory.py), KiB; ``=`` when the
  inventory has theory's counts and bytes for every (op, dtype, group, phase), ``!`` when not
- bus/step: bytes one rank sends per step by nccl-tests' algorithms, KiB; ``x ddp``: that over DDP's on the
  same model and world (theory: FSDP2 1.5, without resharding 1.0)
- ops: collectives per step (the inventory's; CommDebugMode counted the same step)
- peak mem: high-water mark during the timed steps, MiB (CPU: peak RSS of the process)
- #wrong / check: parameter elements differing from single-process training beyond the case's rule
  (``exact`` or a per-parameter ``tol``), after the check step and the timed steps, all ranks

Below it, where each step's time goes (experiments/sharded/decompose.py; its replay case's record), ms:

- step: the step's median (as above); compute: the same step on torch's fake process groups (no
  communication); comm: the step's collectives replayed alone on the same groups (checked: replay #wrong)
- exposed = max(step - compute, 0): the step's time not spent computing; hidden = max(comm - exposed, 0):
  communication that ran while computing. ``~`` marks compute measured above the step: the two medians are
  within each other's noise there, and hidden is then the whole replay, an upper bound
- peak mem and mem/ddp: the step's high-water mark, MiB, max over ranks, and that over DDP's in the same run

Then each strategy's collectives: op, dtype, S bytes, group (mesh dimension), phase, count.

Below the table, the pipeline strategies' schedules (stages, micro-batches, the modelled bubble fraction
(p - 1) / (v m + p - 1); the depth of a pipeline whose stages needed more blocks than SHARDED_DEPTH gives),
then each strategy's collectives: op, dtype, S bytes, group (mesh dimension), phase, count; a pipeline's
point-to-point ops per rank and peer (S/step, theory: every message once; bus/step: the busiest rank's sends;
ops: messages).

Last, in one line, the torch warnings the inventory's step filtered as harmless, and the check that shows them
so (experiments/sharded/quiet.py).
"""

from __future__ import annotations

from suite.api import Clause, fmt_bytes, iters_label, metrics, num, tail_cell, wrong, wrong_cell

from .quiet import line as filtered_line
from .strategies import is_baseline


def _check_cell(r: dict) -> str:
    rule = r.get("check_rule") or "-"
    return "exact" if rule == "exact" else f"tol {r.get('check_tol', 0):z.1e}"


def _row(r: dict) -> str:
    kib = lambda k: num(r[k] / 1024 if r.get(k) is not None else None, ".1f", 9)  # noqa: E731
    same = {True: "=", False: "!"}.get(r.get("inventory_matches_theory"), " ")
    peak = r.get("peak_mem_bytes")
    return (
        f" {str(r.get('label', r['op']))[:16]:>16} {r['p50_us'] / 1e3:z9.2f} {tail_cell(r, 'p95_us', '.2f', 8, 1e3)}"
        f" {kib('inventory_bytes')} {kib('theory_bytes')}{same} {kib('bus_bytes')}"
        f" {num(r.get('bus_vs_ddp'), '.2f', 6)} {num(r.get('inventory_ops'), 'd', 5)}"
        f" {num(peak / 2**20 if peak else None, '.0f', 9)} {wrong_cell(r)}  {_check_cell(r)}"
    )


def _inventory_lines(r: dict) -> list[str]:
    out = []
    for row in r.get("inventory") or []:
        where = f"rank {row['rank']} {'->' if row['op'] == 'send' else '<-'} {row['peer']}: " if "rank" in row else ""
        out.append(
            f"#   {str(r.get('label', r['op'])):>16}: {where}{row['count']} x {row['op']} {row['dtype']}"
            f" {row['bytes']} B on {row['group']} in {row['phase']}"
        )
    return out


def _ms(r: dict | None, k: str) -> str:
    v = None if r is None else r.get(k)
    return num(v * 1e3 if v is not None else None, ".2f", 8)


def _decomposition_lines(steps: list[dict], replays: dict[str, dict]) -> list[str]:
    ddp = next((r for r in steps if is_baseline(r.get("strategy"))), None)
    ddp_peak = (ddp or {}).get("peak_mem_bytes")
    lines = [
        "# where the step's time goes (ms; compute: the step on fake process groups; comm: its collectives replayed)",
        f"#{'strategy':>16} {'step':>8} {'compute':>8} {'comm':>8} {'exposed':>8} {'hidden':>8}  {'#wrong':>6}"
        f" {'peak mem':>9} {'mem/ddp':>7}",
    ]
    for r in steps:
        rp = replays.get(r.get("strategy"))
        peak = r.get("peak_mem_bytes")
        over = rp is not None and rp.get("compute_s") is not None and rp["compute_s"] > rp["step_s"]
        lines.append(
            f" {str(r.get('label', r['op']))[:16]:>16} {r['p50_us'] / 1e3:z8.2f} {_ms(r, 'compute_s')}"
            f" {_ms(rp, 'comm_replay_s')} {_ms(rp, 'exposed_comm_s')} {_ms(rp, 'hidden_comm_s')}{'~' if over else ' '}"
            f" {wrong_cell(rp) if rp else num(None, 'd', 6)} {num(peak / 2**20 if peak else None, '.0f', 9)}"
            f" {num(peak / ddp_peak if peak and ddp_peak else None, '.2f', 7)}"
        )
    n_wrong = sum(wrong(r) for r in replays.values())
    lines.append(
        f"# #wrong: elements of the replayed collectives differing from their exact values, all ranks: {n_wrong} "
        f"[{'OK' if n_wrong == 0 else 'FAILED'}]"
    )
    return lines


def _pipeline_line(r: dict) -> str:
    raised = r.get("depth_raised_from")
    return (
        f"#   {str(r.get('label', r['op'])):>16}: {r['schedule']}, {r['stages']} stages"
        f" ({r['stages_per_rank']} per rank) x {r['microbatches']} micro-batches,"
        f" {r['activation_bytes']} B per activation, bubble {r['bubble_fraction']:z.2f} (model)"
        + (
            ""
            if raised is None
            else f"; depth {r.get('depth')}, {r.get('n_params')} params (SHARDED_DEPTH={raised} gives too few layers)"
        )
    )


def _user_theory(records: list[dict]) -> str:
    """What a user model's header says of theory: derived for its pipelines only (pipeline_train.theory)."""
    if all(r.get("theory_note") for r in records):
        return "not modelled"
    return "the pipelines' from their boundaries" + (
        "" if all(r.get("schedule") for r in records) else ", else not modelled"
    )


def format_tables(records: list[dict]) -> str:
    if not records:
        return ""
    replays = {r.get("strategy"): r for r in records if r["op"] == "comm_replay"}
    records = [r for r in records if r["op"] != "comm_replay"]
    if not records:
        records = list(replays.values())
    first = records[0]
    model = (
        f"model {first['model']} ({first.get('n_params', 0)} params; theory: {_user_theory(records)})"
        if first.get("model")
        else f"{first.get('n_params', 0)} params (width {first.get('width')}, depth {first.get('depth')}),"
        f" seq {first.get('seq')}, global batch {first.get('batch')}"
    )
    lines = [
        f"# sharded: {model}, {first['backend']}, {first['device']},"
        f" {first['world_size']} ranks, timing={first['timing_mode']}, {iters_label(records)}",
        f"#{'strategy':>16} {'step p50':>9} {'p95':>8} {'S/step':>9} {'theory':>9}  {'bus/step':>9} {'x ddp':>6}"
        f" {'ops':>5} {'peak mem':>9} {'#wrong':>6}  check",
        f"#{'':>16} {'(ms)':>9} {'(ms)':>8} {'(KiB)':>9} {'(KiB)':>9}  {'(KiB)':>9} {'':>6} {'':>5} {'(MiB)':>9}",
    ]
    lines += [_row(r) for r in records]
    n_wrong = sum(wrong(r) for r in records)
    lines.append(
        "# #wrong: parameter elements differing from single-process training on the global batches beyond the "
        f"case's rule, after the check step and the timed steps, all ranks: {n_wrong} "
        f"[{'OK' if n_wrong == 0 else 'FAILED'}]"
    )
    pipelines = [_pipeline_line(r) for r in records if r.get("schedule")]
    if pipelines:
        lines += ["# pipelines (torch.distributed.pipelining): schedule, stages, micro-batches, bubble", *pipelines]
    if replays:
        lines += _decomposition_lines(records, replays)
    lines.append("# collectives of one step (inventory):")
    for r in records:
        lines += _inventory_lines(r)
    filtered = filtered_line([*records, *replays.values()])
    if filtered:
        lines.append(filtered)
    return "\n".join(lines) + "\n"


def headline(run: dict, recs: list[dict]) -> Clause | None:
    """Each strategy's training step time, and its collective bytes per step (by theory) against DDP's."""
    steps = [r for r in recs if r["op"] == "train_step" and r.get("strategy")]
    if not steps:
        return None
    t = metrics.format_time_us
    text = "train step " + ", ".join(f"{r['strategy']} {t(r['time_us'])}" for r in steps)
    ddp = next((r for r in steps if is_baseline(r["strategy"]) and r["size_bytes"]), None)
    others = [r for r in steps if r is not ddp and r["size_bytes"]]
    if ddp is not None and others:
        text += f"; collective bytes per step (theory) against DDP's {fmt_bytes(ddp['size_bytes'])}: " + ", ".join(
            f"{r['strategy']} {r['size_bytes'] / ddp['size_bytes']:z.2f}x" for r in others
        )
    return Clause(text=text, numbers={f"{r['strategy']}_step_us": r["time_us"] for r in steps})
