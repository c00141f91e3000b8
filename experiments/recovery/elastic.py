"""Strategy (a): torchrun elastic restarts (``--max-restarts``) with a torch.distributed.checkpoint every
``ckpt_every`` steps, saved synchronously (``dcp.save``) or asynchronously (``dcp.async_save``).

The runner contract every strategy keeps: ``run(plan) -> dict``. The job runs twice as its own torchrun
sub-job: fault-free (the reference, in ``<workdir>/ref``), then under the plan's faults (``<workdir>/run``).
Its state at every restore and commit is compared with the reference's at the same step: ``exact`` is True
when all of them and the final state are bitwise equal; otherwise ``wrong_step`` names the first step where
the state went wrong (the caller's exit status 6).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from . import measure, wall
from .plan import Plan, check_plan
from .schedule import continue_stopped, stop_seconds

STRATEGY = "elastic"
ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 600


class RecoveryFailed(RuntimeError):
    """The job did not finish: the restarts ran out, or a rank failed outside the plan's faults."""


def torchrun_argv(plan: Plan, plan_file: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={plan.world}",
        f"--max-restarts={len(plan.faults)}",
        "--monitor-interval=0.1",
        "-m",
        "experiments.recovery.worker",
        str(plan_file),
    ]


def _continue_stopped(workdir: Path, stop_s: float, done: threading.Event) -> None:
    """SIGCONT to a rank that stopped itself, ``stop_s`` after it stopped, until the job is done."""
    woken: set[int] = set()
    while not done.wait(0.05):
        continue_stopped(measure.read_events(workdir), stop_s, woken)


def launch(plan: Plan, workdir: Path) -> tuple[list[dict], float, float]:
    """One torchrun sub-job of ``plan`` in ``workdir``: its events, start time and wall time."""
    shutil.rmtree(workdir, ignore_errors=True)  # a fresh job: no checkpoint of an earlier one to resume
    workdir.mkdir(parents=True)
    plan = replace(plan, workdir=str(workdir))
    (workdir / "plan.json").write_text(json.dumps(plan.to_json()))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = threading.Event()
    waker = threading.Thread(target=_continue_stopped, args=(workdir, stop_seconds(plan.timeout_s), done), daemon=True)
    waker.start()
    t0 = time.time()
    with open(workdir / "torchrun.log", "w") as log:
        job = subprocess.Popen(
            torchrun_argv(plan, workdir / "plan.json"), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        striker = threading.Thread(target=wall.strike_all, args=(plan.faults, job.pid, workdir, t0, done), daemon=True)
        striker.start()
        try:
            rc = job.wait(timeout=JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            job.kill()
            rc = job.wait()
        finally:
            done.set()
            striker.join()
    wall_s = time.time() - t0
    if rc != 0:
        tail = (workdir / "torchrun.log").read_text()[-1500:]
        raise RecoveryFailed(f"the {STRATEGY} job in {workdir} exited {rc} after {wall_s:z.1f} s:\n{tail}")
    return measure.read_events(workdir), t0, wall_s


def run(plan: Plan) -> dict:
    """The runner contract: one run of ``plan`` under torchrun elastic restarts, measured and verified."""
    check_plan(plan)
    root = Path(plan.workdir)
    ref_plan = replace(plan, faults=(), bug="", workdir="")
    ref_dir = root / f"ref-{hashlib.sha256(json.dumps(ref_plan.to_json(), sort_keys=True).encode()).hexdigest()[:12]}"
    ref_events = measure.read_events(ref_dir) if (ref_dir / "done").is_file() else launch(ref_plan, ref_dir)[0]
    (ref_dir / "done").touch()
    events, t0, wall = (
        (ref_events, *_ref_clock(ref_events)) if not plan.faults else launch(plan, root / f"run-{time.time_ns()}")
    )
    reference = measure.state_at(ref_events)
    wrong = measure.first_wrong(events, reference)
    final = [e["digest"] for e in events if e["kind"] == "done"]
    exact = wrong is None and final == [reference.get(plan.steps)]
    out = measure.summarise(events, ref_events, steps=plan.steps, global_batch=plan.world * plan.batch_per_rank, t0=t0)
    productive = plan.steps * out["step_s_clean"]
    return {
        "strategy": STRATEGY,
        "fault": ",".join(f.spell() for f in plan.faults) or "none",
        "steps": plan.steps,
        "wall_s": wall,
        **out,
        "ettr": productive / wall if wall > 0 else None,
        "exact": exact,
        "tolerance": 0.0,
        "wrong_step": wrong["step"] if wrong else None,
        "wrong": measure.wrong_line(wrong)
        if wrong
        else ("" if exact else "the final state differs from the fault-free run's"),
        "ckpt_mode": plan.ckpt_mode,
        "ckpt_every": plan.ckpt_every,
        "world": plan.world,
        "kinds": measure.KINDS,
        "events": measure.timeline(events, t0),
    }


def _ref_clock(events: list[dict]) -> tuple[float, float]:
    t = [e["t"] for e in events]
    return min(t), max(t) - min(t)
