"""Strategy (a): torchrun elastic restarts (``--max-restarts``) with a torch.distributed.checkpoint every
``ckpt_every`` steps, saved synchronously (``dcp.save``) or asynchronously (``dcp.async_save``).

The runner contract every strategy keeps: ``run(plan) -> dict``. The job runs twice as its own torchrun
sub-job: fault-free (the reference, in ``<workdir>/ref``), then under the plan's faults (``<workdir>/run``).
Every rank's state at every restore and commit is compared with the reference's at the same step (a restore
with the checkpoint's, rank 0's; a commit with the same rank's): ``exact`` is True when all of them and every
rank's final state are bitwise equal; otherwise ``wrong_step`` names the first step where
the state went wrong (the caller's exit status 6).

A plan of ``nnodes`` > 1 spans the compose simulation's first ``nnodes`` nodes: this node (node 0) starts its
torchrun agent and writes ``job.json`` next to the plan, in the folder every node sees; each other node's leading
suite rank runs ``follow``, which starts that node's agent for it; the agents meet at the plan's c10d rendezvous
on node 0. A ``disconnect`` is struck from the host (disconnect.py ``--watch``, timed from the job's first step);
its truth (``truth/``) is read once the job has ended, to score it (measure.py ``host_faults``).
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

from suite.api import write_json_atomic

from . import measure, wall
from .measure import RecoveryFailed
from .plan import STRATEGIES, Plan, check_plan
from .schedule import continue_stopped, stop_seconds

STRATEGY = "elastic"
ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 600
REF_LOGS = "every rank's digests"
"""What a fault-free reference's events hold, part of its folder's name: a folder of RECOVERY_DIR kept from a
reference that logged less (rank 0's digests only) is not reused."""


def torchrun_argv(plan: Plan, plan_file: Path, node: int = 0) -> list[str]:
    """One agent of the job: alone on this machine, or node ``node``'s of ``plan.nnodes`` meeting at its c10d
    rendezvous. Node 0's agent hosts the rendezvous store and no other's does (``is_host``): left to torchrun, an
    agent hosts it where the endpoint's address is its own machine's, which every agent's is when all run on one
    machine (the tests), so the first agent up would host it, whichever node it is."""
    where = (
        ["--standalone", f"--nproc-per-node={plan.world}"]
        if plan.nnodes == 1
        else [
            f"--nnodes={plan.nnodes}",
            f"--nproc-per-node={plan.world // plan.nnodes}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={plan.rdzv_endpoint}",
            f"--rdzv-id={Path(plan.workdir).name}",
            f"--rdzv-conf=is_host={int(node == 0)}",
        ]
    )
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *where,
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
    done = threading.Event()
    waker = threading.Thread(target=_continue_stopped, args=(workdir, stop_seconds(plan.timeout_s), done), daemon=True)
    waker.start()
    t0 = time.time()
    if plan.nnodes > 1:  # the other nodes' agents (follow) and the host's disconnects start from it
        write_json_atomic(workdir / "job.json", {"t0": t0})
    with open(workdir / "torchrun.log", "w") as log:
        job = _agent(plan, workdir, log, node=0)
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
            (workdir / "ended").touch()
    wall_s = time.time() - t0
    if rc != 0:
        tail = (workdir / "torchrun.log").read_text()[-1500:]
        raise RecoveryFailed(f"the {STRATEGY} job in {workdir} exited {rc} after {wall_s:z.1f} s:\n{tail}")
    events = measure.read_events(workdir)
    return sorted(events + measure.host_faults(plan.faults, workdir, events), key=lambda e: e["t"]), t0, wall_s


def _agent(plan: Plan, workdir: Path, log, node: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if plan.nnodes > 1:  # a new bootstrap port each rendezvous round: it names the workers' attempt (worker.py)
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    argv = torchrun_argv(plan, workdir / "plan.json", node)
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def follow(folder: str, node: int, stop: threading.Event) -> None:
    """Node ``node``'s side of the jobs that span nodes: for each job node 0 starts in ``folder`` (its ``job.json``)
    while ``stop`` is not set, this node's torchrun agent, if the job spans it; agents still up at ``stop`` are
    ended."""
    seen: set[Path] = set()
    agents: list[subprocess.Popen] = []
    try:
        while not stop.wait(0.05):
            for req in sorted(Path(folder).glob("*/job.json")):
                if req in seen:
                    continue
                seen.add(req)
                job = json.loads(req.read_text())
                plan = Plan.from_json(json.loads((req.parent / "plan.json").read_text()))
                stale = (req.parent / "ended").exists() or time.time() - job["t0"] > JOB_TIMEOUT_S
                if stale or node >= plan.nnodes:
                    continue
                with open(req.parent / f"torchrun.node{node}.log", "w") as log:
                    agents.append(_agent(plan, req.parent, log, node))
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
            a.wait()


def run(plan: Plan) -> dict:
    """The runner contract: one run of ``plan`` under torchrun elastic restarts, measured and verified."""
    check_plan(plan)
    root = Path(plan.workdir)
    ref_plan = replace(plan, faults=(), bug="", workdir="")
    key = json.dumps({**ref_plan.to_json(), "logs": REF_LOGS}, sort_keys=True).encode()
    ref_dir = root / f"ref-{hashlib.sha256(key).hexdigest()[:12]}"
    ref_events = measure.read_events(ref_dir) if (ref_dir / "done").is_file() else launch(ref_plan, ref_dir)[0]
    (ref_dir / "done").touch()
    events, t0, wall = (
        (ref_events, *_ref_clock(ref_events)) if not plan.faults else launch(plan, root / f"run-{time.time_ns()}")
    )
    reference = measure.state_at(ref_events)
    wrong = measure.first_wrong(events, reference)
    finals = measure.wrong_finals(events, reference, steps=plan.steps, world=plan.world)
    exact = wrong is None and not finals
    out = measure.summarise(events, ref_events, steps=plan.steps, global_batch=plan.world * plan.batch_per_rank, t0=t0)
    productive = plan.steps * out["step_s_clean"]
    return {
        "strategy": STRATEGY,
        "heals_from_peer": STRATEGIES[STRATEGY].heals_from_peer,
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
        else ("" if exact else f"the final state of rank(s) {finals} differs from the fault-free run's"),
        "ckpt_mode": plan.ckpt_mode,
        "ckpt_every": plan.ckpt_every,
        "world": plan.world,
        "kinds": measure.KINDS,
        "events": measure.timeline(events, t0),
    }


def _ref_clock(events: list[dict]) -> tuple[float, float]:
    t = [e["t"] for e in events]
    return min(t), max(t) - min(t)
