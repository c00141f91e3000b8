"""``python -m experiments.recovery.ettr_runs``: long elastic runs under Poisson failures, one run record each, for
the ETTR model's check against measured runs (``make ettr-measure``; docs/recovery.md, "ETTR: the model").

    python -m experiments.recovery.ettr_runs --mtbf 30,60,120 --run-s 150 --step-s 0.1 --ckpt-every 50 \\
        --repeats 1 --out records.json

Each run trains ``--run-s`` seconds' worth of steps of ``--step-s`` each (the step padded to that length: a
bigger model's compute, so that the runs last minutes) on ``--world`` ranks under torchrun elastic restarts,
with a synchronous checkpoint every ``--ckpt-every`` steps, and SIGKILLs at a seeded Poisson schedule of mean
``--mtbf`` seconds of training. Every run is checked bitwise against the fault-free run, as any elastic run is.

A record's ``wall_s`` and ``ettr`` span the training: from its first step's start to its last commit. The job's
first start-up (torchrun, Python and torch imported) is left out, as the model leaves it out; the launch's
whole wall time is ``launch_wall_s``. Its ``step_s_clean`` is the cost of a step with no fault, all of it: the
fault-free run's span less its checkpoints, per step (the timed step alone is ``step_s_timed``). The schedule
counts training steps, so a failure never strikes during a restart or a step redone. Bad input is one line and
status 2 before any rank starts; a run that is not exact makes the command exit 6 after the others, a job that
fails outright 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from suite.api import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_WRONG_RESULT

from . import elastic
from .plan import Plan, PlanError, check_plan
from .schedule import poisson_faults

KEPT = ("t_detect", "t_recover", "steps_redone", "ckpt_save_s", "ckpt_load_s", "ckpt_every", "exact")
"""The elastic record's fields a run record keeps as they are."""


def plans(a: argparse.Namespace) -> list[tuple[float, int, Plan]]:
    """(schedule MTBF in seconds, repeat, plan) of every run: each rate's schedule drawn from its own seed."""
    steps = round(a.run_s / a.step_s)
    out = []
    for repeat in range(a.repeats):
        for i, mtbf_s in enumerate(a.mtbf):
            seed = 1 + repeat * len(a.mtbf) + i
            faults = poisson_faults(seed=seed, mtbf=mtbf_s / a.step_s, steps=steps, world=a.world)
            plan = Plan(
                steps=steps,
                world=a.world,
                faults=tuple(faults),
                ckpt_every=a.ckpt_every,
                workdir=a.workdir,
                timeout_s=a.timeout,
                step_pad_s=a.step_s,
            )
            check_plan(plan)
            out.append((mtbf_s, repeat, plan))
    return out


def span(out: dict) -> float:
    """An elastic run's training span: its first step's start (the first commit less a step) to its last commit."""
    commits = [e["t"] for e in out["events"] if e["kind"] == "commit"]
    return max(commits) - min(commits) + out["step_s_clean"]


def clean_step_s(ref: dict) -> float:
    """The cost of one step with no fault: the fault-free run's training span less its checkpoint stalls, per
    step. It holds what the timed step leaves out (the batch's indexing, the event line, the digest), which a
    fault-free run pays too."""
    saves = (ref["steps"] - 1) // ref["ckpt_every"]
    return (span(ref) - saves * ref["ckpt_save_s"]) / ref["steps"]


def record(out: dict, step_s: float, mtbf_s: float, repeat: int, load: tuple[float, float]) -> dict:
    """The ETTR model's run record of one elastic run's result (``elastic.run``), over its training span, with
    ``step_s`` the cost of one step with no fault (``clean_step_s``)."""
    return {
        "strategy": out["strategy"],
        "heals_from_peer": out["heals_from_peer"],
        "fault": f"poisson:{mtbf_s:zg}s",
        "mtbf_s": mtbf_s,
        "repeat": repeat,
        "n_faults": len({e["t"] for e in out["events"] if e["kind"] == "fault"}),
        "wall_s": span(out),
        "ettr": out["steps"] * step_s / span(out),
        "launch_wall_s": out["wall_s"],
        "load_avg": list(load),
        **{k: out[k] for k in KEPT},
        "step_s_clean": step_s,
        "step_s_timed": out["step_s_clean"],
    }


def _seconds_list(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of seconds") from None
    if not values or not all(v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every MTBF must be > 0 s")
    return values


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # bad input is one line and status 2, not argparse's usage block
        print(f"ettr_runs: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m experiments.recovery.ettr_runs", description=__doc__.split("\n")[0])
    ap.add_argument("--mtbf", type=_seconds_list, required=True, help="schedule MTBFs in seconds, e.g. 30,60,120")
    ap.add_argument("--run-s", type=float, default=150.0, help="training time of each run, in seconds of steps")
    ap.add_argument("--step-s", type=float, default=0.1, help="each step lasts at least this long")
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=30.0, help="the job's collective timeout in seconds")
    ap.add_argument("--workdir", default="", help="checkpoints and events (default: a new temporary folder)")
    ap.add_argument("--out", required=True, help="the run records, JSON (make ettr-validate reads it)")
    return ap


def main(argv: list[str] | None = None) -> int:
    try:
        a = parser().parse_args(argv)
    except SystemExit as e:  # argparse's own one-line usage error, status 2
        return int(e.code or 0)
    a.workdir = a.workdir or tempfile.mkdtemp(prefix="ettr-runs-")
    try:
        if not a.step_s > 0 or a.run_s < a.step_s or a.repeats < 1:
            raise PlanError(
                f"--step-s must be > 0, --run-s at least one step and --repeats >= 1, got --step-s {a.step_s:zg} "
                f"--run-s {a.run_s:zg} --repeats {a.repeats}"
            )
        runs = plans(a)
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text("")
    except (PlanError, OSError) as e:
        print(f"ettr_runs: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    records = []
    step_s = clean_step_s(elastic.run(replace(runs[0][2], faults=())))  # the reference every run is checked against
    for mtbf_s, repeat, plan in runs:
        before = os.getloadavg()[0]
        try:
            out = elastic.run(plan)
        except elastic.RecoveryFailed as e:
            print(f"ettr_runs: {str(e).splitlines()[0]}", file=sys.stderr)
            return EXIT_FAILED
        rec = record(out, step_s, mtbf_s, repeat, (before, os.getloadavg()[0]))
        records.append(rec)
        Path(a.out).write_text(json.dumps({"records": records}, indent=1))
        print(
            f"{rec['fault']} repeat {repeat}: {rec['n_faults']} failures, training span {rec['wall_s']:z.1f} s, "
            f"ETTR {rec['ettr']:z.3f}, exact {rec['exact']}",
            flush=True,
        )
    return 0 if all(r["exact"] for r in records) else EXIT_WRONG_RESULT


if __name__ == "__main__":
    sys.exit(main())
