"""The recovery experiment's torchft strategy: fault-tolerant DDP across replica groups under torchft's
Lighthouse, with live recovery of a restarted replica from a healthy peer (no checkpoint).

``run(plan) -> dict`` starts a Lighthouse in this process and one process per replica group
(``torchft_worker``), lets them join the first quorum together, and restarts a replica group the fault
schedule kills (SIGKILL mid-step, after the step's quorum; or, for a fault in wall-clock seconds, whatever the
replica is doing then, counted from the first step). The surviving replicas go on committing steps alone; the
restarted one heals from a peer and joins again. At the end the run is checked against the
one-process reference that applies exactly the committed steps (``torchft_check``), and measured.

There are no checkpoints: ``ckpt_save_s`` and ``ckpt_load_s`` are None (a healed replica's state comes from
a live peer over torchft's HTTP transport). From the command line::

    .venv/bin/python -m experiments.recovery.torchft_strategy --steps 30 --fault kill:1@10 --workdir /tmp/ft
    .venv/bin/python -m experiments.recovery.torchft_strategy --steps 60 --fault kill:1@2.5s --workdir /tmp/ft

exits 0 when the run equals its reference, 6 (wrong results) naming the first wrong step otherwise, 2 on
bad input before anything starts. ``--fault`` takes the recovery experiment's spelling (``RECOVERY_FAULTS``,
``schedule.parse_faults``), the replica group in the rank's place: ``kill:<replica>@<step>``,
``stop:<replica>@<step>``, ``kill:<replica>@<t>s``, ``poisson:<mtbf>``, ``poisson:<mtbf>s`` (whose draws
spare replica ``schedule.KEPT``). ``--model module:function`` trains a SHARDED_MODEL factory's model instead of
the article's (user.py), its batch's rows split over the replica groups.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from suite.api import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_WRONG_RESULT, ConfigError

from . import torchft_check as check
from . import user
from .plan import STRATEGIES, Plan, PlanError, check_bug, check_fault, check_one_clock, check_writable, plants_of
from .schedule import KEPT, continue_stopped, keeps_one, parse_faults, stop_seconds
from .torchft_data import BATCH

FAULTS = ("kill", "stop")
"""Fault classes this strategy runs: ``kill`` SIGKILLs a replica group mid-step and restarts it; ``stop``
SIGSTOPs it past the collective timeout, then SIGCONT: the same process rejoins and heals from a peer. A kill in
wall-clock seconds (``kill:<replica>@<t>s``, ``poisson:<mtbf>s``) is the runner's, at that time from the first step:
it may strike a replica mid-step, in its quorum, or while it heals."""
STRATEGY = "torchft"
PLANTS = plants_of(STRATEGY)
"""Planted recovery bugs (the plan's ``bug``; plan.PLANTS says what each does): a healed replica joins with stale
weights; a step counted as committed that one replica never applied (at the plan's ``bug_step``)."""


def validate(plan: Plan) -> None:
    """Raise PlanError (one line) for a plan this strategy cannot run: ``world`` replica groups of one rank."""
    if plan.world < 2:
        raise PlanError(f"torchft needs at least 2 replica groups, got a world of {plan.world}")
    if plan.steps < 1:
        raise PlanError(f"steps must be >= 1, got {plan.steps}")
    if not plan.timeout_s > 0:
        raise PlanError(f"the collective timeout must be > 0 s, got {plan.timeout_s}")
    for f in plan.faults:
        if f.kind not in FAULTS:
            raise PlanError(f"unknown fault class {f.kind!r} for torchft (known: {', '.join(FAULTS)})")
        check_fault(f, plan)
    check_one_clock(plan.faults)
    keeps_one(plan.faults, plan.world)
    check_bug(plan, STRATEGY)
    if plan.bug_step is not None and not 0 <= plan.bug_step < plan.steps:
        raise PlanError(f"planted bug step {plan.bug_step} is outside the run (steps 0..{plan.steps - 1})")
    check_writable(plan.workdir)


SPARES = 2
"""Warm spares a replica the schedule kills keeps ahead: the next life's, and the one after it, so that a
replacement killed as it starts (a wall-clock kill that strikes a restart) is replaced by a warm spare too (one
started only then would still be importing torch, seconds, when its peers finish the run)."""


class Replicas:
    """The replica-group processes of one run. A replica the schedule kills is replaced by a warm spare
    (started beforehand, imported and loaded), woken when the killed process is seen dead."""

    def __init__(self, plan: Plan, lighthouse: str):
        self.plan, self.lighthouse, self.dir = plan, lighthouse, Path(plan.workdir)
        self.procs: dict[int, subprocess.Popen] = {}
        self.spares: dict[int, list[subprocess.Popen]] = {}  # replica -> its next lives' warm spares, in order
        self.dead_since: dict[int, float] = {}
        self.lives = {g: 0 for g in range(plan.world)}
        self.woken: set[int] = set()  # the stopped processes sent SIGCONT
        self.go = self.dir / "go"
        self.t_go: float | None = None  # the first step's start: wall-clock faults count from it

    def faults_of(self, g: int, life: int) -> list[dict]:
        """The faults life ``life`` of replica ``g`` strikes, in step (or time) order: the stops before its kill, and
        the kill that ends it (each kill ends a life; a stopped replica goes on as the same process)."""
        lives: list[list[dict]] = [[]]
        for f in sorted((f for f in self.plan.faults if f.rank == g), key=lambda f: (f.at_s or 0.0, f.step)):
            lives[-1].append({"kind": f.kind, "step": f.step, "at_s": f.at_s})
            if f.kind == "kill":
                lives.append([])
        return lives[life] if life < len(lives) else []

    def dies(self, g: int, life: int) -> bool:
        return any(f["kind"] == "kill" for f in self.faults_of(g, life))

    def path(self, g: int, life: int, suffix: str) -> Path:
        return self.dir / f"replica{g}.life{life}.{suffix}"

    def launch(self, g: int, life: int) -> subprocess.Popen:
        p = self.plan
        args = {
            "replica": g,
            "groups": p.world,
            "steps": p.steps,
            "seed": p.seed,
            "batch": p.batch_per_rank,
            "model": p.model,
            "lighthouse": self.lighthouse,
            "op_timeout_s": p.timeout_s,
            "quorum_timeout_s": p.deadline_s,
            "step_pad_s": p.step_pad_s,
            "log": str(self.path(g, life, "jsonl")),
            "final": str(self.dir / f"replica{g}.final.pt"),
            "go": str(self.go),
            "wake": str(self.path(g, life, "wake")) if life else None,
            "faults": [f for f in self.faults_of(g, life) if f["at_s"] is None],  # a wall-clock kill is the runner's
            "plant": self.plant(g, life),
            "plant_step": p.steps // 2 if p.bug_step is None else p.bug_step,
        }
        with open(self.path(g, life, "stderr"), "w") as err:
            cmd = [sys.executable, "-m", "experiments.recovery.torchft_worker", json.dumps(args)]
            return subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, cwd=Path(__file__).parents[2])

    def plant(self, g: int, life: int) -> str | None:
        """The planted bug this process carries, by name (plan.PLANTS: on which replicas and lives)."""
        plant = PLANTS.get(self.plan.bug)
        return plant.name if plant is not None and plant.carried_by(g, life) else None

    def start(self) -> None:
        for g in self.lives:
            self.procs[g] = self.launch(g, 0)
            self.stock(g)

    def stock(self, g: int) -> None:
        """Starts the spares replica ``g`` lacks: one for each of its next ``SPARES`` lives the schedule needs."""
        spares = self.spares.setdefault(g, [])
        while len(spares) < SPARES and self.dies(g, self.lives[g] + len(spares)):
            spares.append(self.launch(g, self.lives[g] + len(spares) + 1))

    def ready(self) -> bool:
        """Every replica has joined its Lighthouse and every spare is warm."""
        return all(_logged(self.path(g, 0, "jsonl"), "ready") for g in self.procs) and all(
            _logged(self.path(g, self.lives[g] + i, "jsonl"), "spare")
            for g, spares in self.spares.items()
            for i in range(1, len(spares) + 1)
        )

    def poll(self) -> bool:
        """Wakes a spare for each replica the schedule killed and continues each stopped one past the timeout;
        True once every replica has finished."""
        self.strike()
        lines = (x for g in self.procs for x in _lines(self.path(g, self.lives[g], "jsonl")))
        stops = [json.loads(x) for x in lines if '"fault": "stop"' in x and x.endswith("\n")]
        continue_stopped(stops, stop_seconds(self.plan.timeout_s), self.woken)
        for g, proc in self.procs.items():
            rc = proc.poll()
            if rc == -signal.SIGKILL and self.spares.get(g):
                self.dead_since.setdefault(g, time.monotonic())
                if time.monotonic() - self.dead_since[g] < self.plan.restart_delay_s:
                    continue  # the replacement is not there yet: the others go on without it
                del self.dead_since[g]
                self.lives[g] += 1
                self.path(g, self.lives[g], "wake").touch()
                self.procs[g] = self.spares[g].pop(0)
                self.stock(g)
            elif rc not in (None, 0):
                tail = "".join(_lines(self.path(g, self.lives[g], "stderr"))[-3:])
                raise RuntimeError(f"replica {g} exited with status {rc}: {tail.strip()[-300:]}")
        return not self.dead_since and all(proc.poll() == 0 for proc in self.procs.values())

    def strike(self) -> None:
        """The wall-clock kills that are due, counted from the first step: replica g's k-th kill ends its life k,
        struck while that life's process runs (one due while the replica waits for its replacement strikes the
        replacement as it starts). Its event goes to the life's log, as a kill the replica strikes itself logs
        one, with what it struck: ``step`` (the life was training) or ``restart`` (it had not healed yet). None
        strikes once a replica has finished the run: the job is over (its peers end with their last step)."""
        if self.t_go is None:
            return
        for g, proc in self.procs.items():
            life = self.lives[g]
            due = [f for f in self.faults_of(g, life) if f["at_s"] is not None and time.time() >= self.t_go + f["at_s"]]
            if not due or proc.poll() is not None:  # exited (struck already, or done) until its replacement's turn
                continue
            if any(_logged(self.path(h, self.lives[h], "jsonl"), "done") for h in self.procs):
                return
            proc.kill()
            t = time.time()
            proc.wait()
            rows = [json.loads(x) for x in _lines(self.path(g, life, "jsonl")) if x.endswith("\n")]
            trained = life == 0 or any(r["kind"] in ("heal", "step") for r in rows)
            at = [r["step"] + (r["kind"] == "step") for r in rows if r["kind"] in ("ready", "heal", "step")]
            event = {"kind": "fault", "t": t, "step": max(at, default=0), "fault": "kill", "pid": proc.pid}
            event |= {"at_s": due[0]["at_s"], "struck": "step" if trained else "restart"}
            with open(self.path(g, life, "jsonl"), "a") as log:
                log.write(json.dumps(event) + "\n")

    def stop(self) -> None:
        for proc in [*self.procs.values(), *(p for spares in self.spares.values() for p in spares)]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _logged(path: Path, kind: str) -> bool:
    return any(f'"kind": "{kind}"' in line for line in _lines(path))


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines(keepends=True)
    except FileNotFoundError:
        return []


def train(plan: Plan) -> None:
    """Runs the replica groups to the end of the plan under one Lighthouse (raises TimeoutError)."""
    os.environ.setdefault("RUST_LOG", "warn")  # the Lighthouse's per-quorum INFO lines stay off the terminal
    from torchft.coordination import LighthouseServer

    lighthouse = LighthouseServer(bind="[::]:0", min_replicas=1, join_timeout_ms=200, heartbeat_timeout_ms=1000)
    replicas = Replicas(plan, lighthouse.address())
    deadline = time.monotonic() + plan.deadline_s
    try:
        replicas.start()
        while not replicas.ready():
            replicas.poll()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the replica groups were not ready within {plan.deadline_s:zg} s")
            time.sleep(0.02)
        replicas.go.touch()
        replicas.t_go = time.time()
        while not replicas.poll():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the run did not finish within {plan.deadline_s:zg} s")
            time.sleep(0.005)
    finally:
        replicas.stop()
        lighthouse.shutdown()


def run(plan: Plan) -> dict:
    """One run of the torchft strategy: the runner contract's dict (``exact`` False and ``mismatch`` naming
    the first wrong step when the recovered state differs from the reference)."""
    validate(plan)
    t0 = time.time()
    train(plan)
    wall = time.time() - t0
    workdir = Path(plan.workdir)
    rows = check.read_logs(workdir)
    out = {
        "strategy": STRATEGY,
        "heals_from_peer": STRATEGIES[STRATEGY].heals_from_peer,
        "fault": ",".join(f.kind for f in plan.faults) or "none",
        "steps": plan.steps,
    }
    try:
        verified = check.verify(plan, rows, workdir)
        steps, mismatch = verified["steps"], None
    except check.RecoveryMismatch as e:
        steps, mismatch, verified = check.committed_steps(rows), e, {"bitwise": False}
    log = check.committed_log(plan, steps)
    out |= check.timings(plan, rows, log)
    out |= {
        "run_wall_s": wall,
        "ckpt_save_s": None,  # no checkpoints: a healed replica's state comes from a live peer
        "ckpt_load_s": None,
        "exact": mismatch is None,
        "tolerance": "bitwise" if verified["bitwise"] else f"final weights within {check.TOLERANCE}",
        "mismatch": None if mismatch is None else str(mismatch),
        "mismatch_step": None if mismatch is None else mismatch.step,
        "events": check.events(rows, min(r["t"] for r in rows)),
        "committed": log,
        "plan": asdict(plan),
    }
    return out


OP_TIMEOUT_S = 10.0
"""The command line's collective timeout (the suite's cases take the job's, RECOVERY_TIMEOUT_S)."""


def parse(argv: list[str]) -> Plan:
    ap = argparse.ArgumentParser(prog="python -m experiments.recovery.torchft_strategy", description=__doc__)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--groups", type=int, default=2, help="replica groups (1 rank each)")
    ap.add_argument(
        "--fault",
        action="append",
        default=[],
        help="kill:<replica>@<step>, stop:<replica>@<step>, kill:<replica>@<t>s, poisson:<mtbf>[s] "
        "(as RECOVERY_FAULTS; repeat it, or separate faults with commas)",
    )
    ap.add_argument("--op-timeout", type=float, default=OP_TIMEOUT_S, help="the collective timeout in seconds")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--timeout", type=float, default=300.0, help="the whole run's time limit in seconds")
    ap.add_argument("--step-pad", type=float, default=0.0, help="each step lasts at least this many seconds")
    ap.add_argument("--restart-delay", type=float, default=0.0, help="seconds before a killed replica's spare")
    ap.add_argument("--plant", default=None, help=f"a planted recovery bug: {', '.join(PLANTS)}")
    ap.add_argument("--plant-step", type=int, default=None)
    ap.add_argument("--json", default=None, help="write the result here")
    ap.add_argument("--model", default="", help="module:function, a SHARDED_MODEL factory to train (user.py)")
    a = ap.parse_args(argv)
    faults = parse_faults(",".join(a.fault), world=a.groups, steps=a.steps, seed=a.seed, keep=KEPT)
    batch = user.check(a.model, a.groups) // a.groups if a.model else BATCH
    return Plan(
        model=a.model,
        steps=a.steps,
        seed=a.seed,
        world=a.groups,
        faults=faults,
        workdir=a.workdir,
        timeout_s=a.op_timeout,
        batch_per_rank=batch,
        deadline_s=a.timeout,
        step_pad_s=a.step_pad,
        restart_delay_s=a.restart_delay,
        bug=a.plant or "",
        bug_step=a.plant_step,
        extra={"json": a.json},
    )


def main(argv: list[str] | None = None) -> int:
    try:
        plan = parse(sys.argv[1:] if argv is None else argv)
        validate(plan)
    except (PlanError, ConfigError) as e:
        print(f"torchft: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        out = run(plan)
    except (TimeoutError, RuntimeError) as e:  # a replica crashed or the run overran: one line, status 1
        print(f"torchft: {e}", file=sys.stderr)
        return EXIT_FAILED
    if plan.extra.get("json"):
        Path(plan.extra["json"]).write_text(json.dumps(out, indent=1, default=str))
    keys = ("fault", "steps", "wall_s", "t_detect", "t_recover", "steps_redone", "samples_dropped", "ettr")
    print(" ".join(f"{k}={out[k]:z.3g}" if isinstance(out[k], float) else f"{k}={out[k]}" for k in keys))
    if not out["exact"]:
        print(f"torchft: wrong results: {out['mismatch']}", file=sys.stderr)
        return EXIT_WRONG_RESULT
    print(f"exact: equal to the one-process reference of the committed steps ({out['tolerance']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
