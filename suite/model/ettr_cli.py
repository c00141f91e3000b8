"""``python -m suite.model.ettr_cli``: the ETTR model's command (make ettr, make ettr-check; docs/recovery.md).

    python -m suite.model.ettr_cli table --ckpt-s C --restart-s R [--async-ckpt-s C2] [--live-s L --step-s S]
        [--scale 1024=7.9h,16384=1.8h | --node-mttf T --ranks-per-node P --ranks 1024,16384]
        per scale and strategy: Young's, Daly's and the best checkpoint interval, the ETTR reached there,
        Meta's estimate, and the gap to ByteRobust's 97% (a markdown table)
    python -m suite.model.ettr_cli check [--seed N] [--failures N]
        the closed forms against a seeded Monte-Carlo of Poisson failures at several rates
    python -m suite.model.ettr_cli validate RECORDS.json
        each run record's measured ETTR beside the model's, the error and the 10% bar (status 1 if missed)

Bad input: one line on stderr, status 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from suite.model import ettr
from suite.model.ettr_sim import simulate

_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
CHECK_RATES = (2.0, 5.0, 20.0, 100.0)
"""MTBF / checkpoint interval of the Monte-Carlo check: failures from every other interval to rare."""


class InputError(ValueError):
    """Bad input: one line, exit status 2."""


def duration_s(text: str, name: str) -> float:
    """'90', '90s', '1.5min', '7.9h', '2d' -> seconds."""
    if not str(text).strip():
        raise InputError(f"{name} is required: a duration like 90, 90s, 1.5min, 7.9h or 2d")
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|min|h|d)?\s*", str(text))
    if not m:
        raise InputError(f"{name} must be a duration like 90, 90s, 1.5min, 7.9h or 2d, got {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def _ranks(text: str, name: str) -> int:
    if not re.fullmatch(r"\s*[1-9]\d*\s*", text):
        raise InputError(f"{name} must be a positive integer, got {text!r}")
    return int(text)


def scales(args) -> dict[int, float]:
    """ranks -> the job's MTBF (s): --scale's published points, or --node-mttf over --ranks."""
    if args.node_mttf:
        per = _ranks(args.ranks_per_node, "--ranks-per-node")
        node = duration_s(args.node_mttf, "--node-mttf")
        out = {}
        for r in args.ranks.split(","):
            n = _ranks(r, "--ranks")
            if n % per:
                raise InputError(f"--ranks {n} is not a whole number of nodes of {per} ranks")
            out[n] = node / (n // per) if node > 0 else 0.0
    else:
        out = {}
        for item in args.scale.split(","):
            ranks, sep, mttf = item.partition("=")
            if not sep:
                raise InputError(f"--scale takes RANKS=MTTF[,RANKS=MTTF...], got {item!r}")
            out[_ranks(ranks, "--scale's RANKS")] = duration_s(mttf, "--scale's MTTF")
    if not out or min(out.values()) <= 0:
        raise InputError("every job MTTF must be positive")
    return out


def fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    for unit, f in (("h", 3600.0), ("min", 60.0)):
        if s >= f:
            return f"{s / f:z.3g} {unit}"
    return f"{s:z.3g} s"


def markdown(cols: list[str], rows: list[list[str]]) -> str:
    """A markdown table: what docs/recovery.md quotes as printed."""
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def format_points(points: list[ettr.Point]) -> str:
    cols = ["ranks", "job MTTF", "strategy", "Young τ", "Daly τ", "best τ", "ETTR at best τ", "Meta's estimate"]
    rows = [
        [f"{p.ranks:,}", fmt_s(p.mtbf_s), p.strategy, fmt_s(p.young_s), fmt_s(p.daly_s), fmt_s(p.best_s)]
        + [f"{p.ettr:z.1%}", "-" if p.meta is None else f"{p.meta:z.1%}"]
        + [f"{(p.ettr - ettr.BYTEROBUST_ETTR) * 100:+z.1f} points"]
        for p in points
    ]
    return markdown(cols + ["vs ByteRobust 97%"], rows)


def format_rows(rows: list[ettr.Row]) -> str:
    cols = ["strategy", "fault", "MTBF", "failures", "R", "measured", "predicted", "at schedule", "first-order"]
    cells = []
    for r in rows:
        models = (r.predicted, r.at_schedule, r.first_order, r.meta)
        cells.append(
            [r.strategy, r.fault, fmt_s(r.mtbf_s), str(r.failures), fmt_s(r.restart_s), f"{r.measured:z.3f}"]
            + ["-" if v is None else f"{v:z.3f}" for v in models]
            + [f"{r.error:+z.1%}", "yes" if r.ok else "NO"]
        )
    rates = ettr.rates_within_bar(rows)
    return (
        markdown(cols + ["Meta's estimate", "error", f"within {ettr.BAR:z.0%}"], cells)
        + f"\n\n{sum(r.ok for r in rows)} of {len(rows)} runs within {ettr.BAR:z.0%}; schedule MTBFs where every "
        f"run is: {', '.join(fmt_s(m) for m in rates) or 'none'} ({len(rates)} of the 3 the model must hold at)"
    )


def check_rows(seed: int, failures: int, ckpt_s: float = 1.0, restart_s: float = 2.0, tau_s: float = 10.0) -> list:
    """Per rate (MTBF = CHECK_RATES × tau): the simulated ETTR of a run long enough for ~``failures``
    failures (at most 10 × ``failures`` intervals) beside the complete model, the first-order budget and
    Meta's estimate; and the same for live recovery."""
    out = []
    for k, ratio in enumerate(CHECK_RATES):
        mtbf = ratio * tau_s
        for live in (False, True):
            tau, c = (1.0, 0.0) if live else (tau_s, ckpt_s)
            work = min(failures * mtbf, 10 * failures * tau)  # rare failures: fewer, they cost less of the run
            sim = simulate(tau_s=tau, ckpt_s=c, restart_s=restart_s, mtbf_s=mtbf, work_s=work, seed=seed + k)
            closed = ettr.live_ettr(tau, restart_s, mtbf) if live else ettr.exact_ettr(tau, c, restart_s, mtbf)
            out.append(
                dict(live=live, mtbf_s=mtbf, tau_s=tau, ckpt_s=c, restart_s=restart_s, failures=sim.failures,
                     simulated=sim.ettr, exact=closed, first_order=ettr.first_order_ettr(tau, c, restart_s, mtbf),
                     meta=ettr.meta_ettr(tau, restart_s, mtbf))
            )  # fmt: skip
    return out


def format_check(rows: list[dict]) -> str:
    cols = ["strategy", "MTBF", "τ", "C", "R", "failures", "simulated ETTR", "complete model", "error"]
    cells = [
        ["live" if r["live"] else "checkpoint"]
        + [fmt_s(r[k]) for k in ("mtbf_s", "tau_s", "ckpt_s", "restart_s")]
        + [f"{r['failures']:,}", f"{r['simulated']:z.4f}", f"{r['exact']:z.4f}"]
        + [f"{r['exact'] / r['simulated'] - 1:+z.2%}", f"{r['first_order']:z.4f}", f"{r['meta']:z.4f}"]
        for r in rows
    ]
    return markdown(cols + ["first-order", "Meta's estimate"], cells)


def _cmd_table(args) -> int:
    costs = {k: duration_s(getattr(args, k), "--" + k.replace("_", "-")) for k in ("ckpt_s", "restart_s")}
    for k in ("async_ckpt_s", "live_s", "step_s", "live_overhead_s"):
        v = getattr(args, k)
        costs[k] = None if v is None else duration_s(v, "--" + k.replace("_", "-"))
    if costs["live_s"] is not None and not costs["step_s"]:
        raise InputError("--live-s needs --step-s (live recovery loses the step in flight)")
    if costs["ckpt_s"] <= 0 and not costs["step_s"]:
        raise InputError("--ckpt-s 0 needs --step-s (a free checkpoint's best interval is one step)")
    points = ettr.extrapolation(
        scales(args),
        ckpt_s=costs["ckpt_s"],
        restart_s=costs["restart_s"],
        async_ckpt_s=costs["async_ckpt_s"],
        live_loss_s=costs["live_s"],
        step_s=costs["step_s"],
        live_overhead_s=costs["live_overhead_s"] or 0.0,
    )
    print(format_points(points))
    return 0


def _cmd_check(args) -> int:
    seed = _ranks(args.seed, "--seed") if args.seed != "0" else 0
    print(format_check(check_rows(seed, _ranks(args.failures, "--failures"))))
    return 0


def _cmd_validate(args) -> int:
    if not args.records.strip():
        raise InputError("validate needs the JSON file of run records (make ettr-validate ETTR_RECORDS=<file>)")
    path = Path(args.records)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read run records from {path}: {e}") from None
    records = data.get("records") if isinstance(data, dict) else data
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise InputError(f"{path} must hold a list of run records (or {{'records': [...]}}), none empty")
    try:
        rows = ettr.validate(records)
    except ValueError as e:
        raise InputError(str(e)) from None
    print(format_rows(rows))
    return 0 if all(r.ok for r in rows) else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m suite.model.ettr_cli", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("table", help="best checkpoint interval and ETTR per strategy at published scales")
    t.add_argument("--ckpt-s", required=True, help="checkpoint save cost: the time training stalls per save")
    t.add_argument("--restart-s", required=True, help="restart cost per failure: time to recover less one step")
    t.add_argument("--async-ckpt-s", help="the stall of an asynchronous save (adds that strategy)")
    t.add_argument("--live-s", help="live recovery's cost per failure, detection + recovery (adds that strategy)")
    t.add_argument("--step-s", help="the cost of a step: intervals in whole steps; live recovery loses one")
    t.add_argument("--live-overhead-s", help="live recovery's cost per step over plain training")
    t.add_argument("--scale", default=",".join(f"{r}={h}h" for r, h in ettr.META_MTTF_H.items()),
                   help="RANKS=JOB_MTTF,... (default: Meta's published MTTFs)")  # fmt: skip
    t.add_argument("--node-mttf", help="one node's MTTF instead of --scale: the job's is it over the nodes")
    t.add_argument("--ranks-per-node", default="8")
    t.add_argument("--ranks", default="1024,16384")
    t.set_defaults(fn=_cmd_table)
    c = sub.add_parser("check", help="the closed forms against a seeded Monte-Carlo of Poisson failures")
    c.add_argument("--seed", default="1")
    c.add_argument("--failures", default="4000", help="about how many failures each simulated run sees")
    c.set_defaults(fn=_cmd_check)
    v = sub.add_parser("validate", help="measured ETTR per run record against the model (the 10%% bar)")
    v.add_argument("records", help="a JSON list of the recovery experiment's run records")
    v.set_defaults(fn=_cmd_validate)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except (InputError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
