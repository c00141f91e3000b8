"""The plan of one recovery run (what every strategy's ``run(plan) -> dict`` is handed) and its checks.

Pure logic, no torch: the plan is checked on the host before any rank starts, and a bad plan is one line
(``PlanError``, exit status 2). A fault strikes rank ``rank`` when it reaches step ``step``; fault i strikes
in the job's i-th attempt (after i restarts), so a schedule of n faults needs n restarts.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass, field

FAULT_CLASSES = ("kill", "stop", "disconnect")
"""kill: the rank gets SIGKILL; stop: SIGSTOP for longer than the timeout, then SIGCONT; disconnect: a compose node
of the job leaves the network for longer than the timeout (``disconnect:<node>@<seconds>s``, compose only)."""
STRETCH_TIMES = (1.5, 3.0)
"""A disconnect's stretch off the network, drawn between these times the job's collective timeout (disconnect.py)."""
CKPT_MODES = ("sync", "async")
"""How the checkpoint is written: ``dcp.save`` (training waits) or ``dcp.async_save`` (training goes on)."""


@dataclass(frozen=True, kw_only=True)
class Plant:
    """A planted recovery bug and what it does: the workers and the checks read these fields (nothing compares its
    name). Each proves a check: the run it is planted in must fail with status 6, naming the step it broke."""

    name: str
    strategy: str
    """The strategy whose recovery it breaks (its name in STRATEGIES)."""
    restores_older: bool = False
    """A restart restores the checkpoint before the one it claims to restore (elastic)."""
    keeps_stale: bool = False
    """A healed replica keeps its own stale weights and takes only its peer's step number (torchft)."""
    skips_step: bool = False
    """The plan's ``bug_step`` is counted as committed, but the ranks that carry it never apply it (torchft)."""
    ranks: tuple[int, ...] | None = None
    """The ranks (torchft: replica groups) that carry it; None: every rank. Where only some do, the others recover
    as they should (elastic: they restore the claimed checkpoint, then these ranks load the older one alone)."""
    healed_only: bool = False
    """Only a rank's replacement (a process that heals) carries it, so a plan with it needs a fault."""

    def carried_by(self, rank: int, life: int = 0) -> bool:
        """Whether rank ``rank``'s process of life ``life`` (0: the first; n: after n restarts) carries it."""
        return (self.ranks is None or rank in self.ranks) and (life > 0 or not self.healed_only)


PLANTS = {
    p.name: p
    for p in (
        Plant(name="older_ckpt", strategy="elastic", restores_older=True),
        Plant(name="older_ckpt_rank1", strategy="elastic", restores_older=True, ranks=(1,)),
        Plant(name="stale", strategy="torchft", keeps_stale=True, healed_only=True),
        Plant(name="phantom", strategy="torchft", skips_step=True, ranks=(0,)),
    )
}
"""The planted recovery bugs (the plan's ``bug``), by name: ``older_ckpt`` restores the checkpoint before the one it
claims on every rank, ``older_ckpt_rank1`` on rank 1 alone; ``stale``: a healed replica joins with stale weights;
``phantom``: replica 0 counts a step as committed that it never applied."""
NO_PLANT = Plant(name="", strategy="")
"""No planted bug: a record that does nothing."""


def plants_of(strategy: str) -> dict[str, Plant]:
    """The planted bugs of one strategy, by name."""
    return {n: p for n, p in PLANTS.items() if p.strategy == strategy}


def check_bug(plan: Plan, strategy: str) -> Plant | None:
    """The plan's planted bug, if any; PlanError (one line) for one the strategy lacks or the job cannot carry."""
    if not plan.bug:
        return None
    known = plants_of(strategy)
    if plan.bug not in known:
        raise PlanError(f"unknown planted bug {plan.bug!r}; choose from {', '.join(known)}")
    plant = known[plan.bug]
    if plant.ranks and max(plant.ranks) >= plan.world:
        raise PlanError(
            f"the planted bug {plant.name} needs a rank {max(plant.ranks)}, but the job has {plan.world} rank"
            + ("s" if plan.world > 1 else "")
        )
    if plant.healed_only and not plan.faults:
        raise PlanError(f"the planted bug {plant.name!r} needs a fault: only a restarted replica heals")
    return plant


RDZV_PORT = 29400
"""The port of the elastic job's c10d rendezvous on node 0 where it spans nodes (torchrun's own default)."""


@dataclass(frozen=True, kw_only=True)
class Strategy:
    """A recovery strategy and the traits the checks read (nothing compares its name)."""

    name: str
    spans_nodes: bool
    """Its job spans the compose simulation's nodes (one torchrun agent a node), so a disconnect can strike it."""
    heals_from_peer: bool
    """It heals a struck rank live from a peer that holds the state (no checkpoint): one replica group must be
    left alone by every fault (schedule.keeps_one), and its Poisson draws spare ``schedule.KEPT``."""


STRATEGIES = {
    s.name: s
    for s in (
        Strategy(name="elastic", spans_nodes=True, heals_from_peer=False),
        Strategy(name="torchft", spans_nodes=False, heals_from_peer=True),
    )
}
"""The recovery strategies a case can run, by name (experiments/recovery/strategies.py: their runners)."""


class PlanError(ValueError):
    """A plan that cannot run; the message is the one line the user sees (exit status 2)."""


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One fault of the schedule."""

    kind: str
    rank: int
    step: int
    """The step the rank is at when it strikes (0-based, before that step runs); 0 for a wall-clock fault."""
    at_s: float | None = None
    """A wall-clock fault: seconds from the job's start, struck by the runner whatever the rank is doing then (a
    step, or a restart); None: the rank strikes itself at ``step``."""

    def spell(self) -> str:
        return (
            f"{self.kind}:{self.rank}@{self.at_s:z.2f}s"
            if self.at_s is not None
            else f"{self.kind}:{self.rank}@{self.step}"
        )


@dataclass(frozen=True, kw_only=True)
class Plan:
    """One recovery run: the workload, its fault schedule and the checkpoint policy. The torchft strategy runs
    ``world`` replica groups of one rank each and no checkpoint (``ckpt_every`` and ``ckpt_mode`` unused)."""

    steps: int = 20
    seed: int = 0
    world: int = 2
    faults: tuple[Fault, ...] = ()
    ckpt_every: int = 5
    ckpt_mode: str = "sync"
    workdir: str = ""
    timeout_s: float = 5.0
    """The collective timeout: a rank silent for longer is taken for lost."""
    params: int = 20_000
    """The DDP experiment's MLP, at about this many parameters."""
    model: str = ""
    """``module:function``, a SHARDED_MODEL factory whose model the job trains instead of the MLP (user.py); its
    batch's rows split over the ranks: ``batch_per_rank`` is then rows / world."""
    batch_per_rank: int = 8
    step_pad_s: float = 0.0
    """Each step lasts at least this long (a bigger model's compute); 0: the small model's own step."""
    bug: str = ""
    bug_step: int | None = None
    """The step a planted bug strikes at, where it is a step's (torchft's ``phantom``; None: mid-run)."""
    restart_delay_s: float = 0.0
    """torchft: how long a killed replica's replacement takes to arrive (0: its warm spare is woken at once)."""
    deadline_s: float = 300.0
    """torchft: the whole run's time limit (a replica group stuck past it fails the run, status 1)."""
    extra: dict = field(default_factory=dict)
    """Free-form notes a strategy may carry (kept in the result)."""
    nnodes: int = 1
    """The elastic job's nodes: 1, one torchrun agent on this machine; more, one agent on each of the compose
    simulation's first ``nnodes`` nodes, meeting at ``rdzv_endpoint`` (a c10d rendezvous)."""
    rdzv_endpoint: str = ""
    """``host:port`` of the job's c10d rendezvous where it spans nodes (node 0 hosts it)."""

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> Plan:
        return Plan(**{**d, "faults": tuple(Fault(**f) for f in d.get("faults", ()))})


def check_plan(plan: Plan) -> None:
    """Raise PlanError (one line) for a plan that cannot run; writes nothing but a probe file in the workdir."""
    if plan.steps < 1 or plan.world < 1:
        raise PlanError(f"the run needs steps >= 1 and world >= 1, got steps={plan.steps} world={plan.world}")
    if not 1 <= plan.ckpt_every <= plan.steps:
        raise PlanError(f"checkpoint interval {plan.ckpt_every} must be between 1 and the run's {plan.steps} steps")
    if plan.ckpt_mode not in CKPT_MODES:
        raise PlanError(f"unknown checkpoint mode {plan.ckpt_mode!r}; choose from {', '.join(CKPT_MODES)}")
    check_bug(plan, "elastic")
    if not plan.step_pad_s >= 0:
        raise PlanError(f"the step pad must be >= 0 s, got {plan.step_pad_s}")
    if not plan.timeout_s > 0:
        raise PlanError(f"the timeout must be > 0 s, got {plan.timeout_s}")
    if plan.nnodes < 1 or plan.world % plan.nnodes:
        raise PlanError(f"the job's {plan.world} ranks cannot be spread evenly over {plan.nnodes} nodes")
    check_nodes(plan)
    for f in plan.faults:
        check_fault(f, plan)
    check_one_clock(plan.faults)
    check_writable(plan.workdir)


SPANNING_FAULTS = ("kill", "disconnect")
"""The faults a job that spans nodes runs. A wall-clock kill strikes a rank's process from its agent's machine, and
a stop holds a rank whose node's agent then restarts for the others without counting a failure, so that the
attempt each node's workers count (torchrun's restart count) would differ; both stay with the one-node job."""


def spans(faults) -> bool:
    """Whether a job under ``faults`` can span nodes: kills in steps and disconnects only."""
    return all(f.kind in SPANNING_FAULTS and (f.kind == "disconnect" or f.at_s is None) for f in faults)


def check_nodes(plan: Plan) -> None:
    """A disconnect needs a job across compose nodes; such a job runs kills in steps and disconnects."""
    if plan.nnodes == 1:
        if any(f.kind == "disconnect" for f in plan.faults):
            raise PlanError("disconnect needs the compose cluster (the job's nodes), which this run is not on")
        return
    if not spans(plan.faults):
        raise PlanError(f"a job across {plan.nnodes} nodes runs kills in steps and disconnects only")


def check_one_clock(faults) -> None:
    """A schedule counts in steps or in wall-clock seconds, not both."""
    if len({f.at_s is None for f in faults}) > 1:
        raise PlanError("a schedule is either in steps or in wall-clock seconds (poisson:<mtbf>s), not both")


def check_fault(f: Fault, plan: Plan) -> None:
    if f.kind not in FAULT_CLASSES:
        raise PlanError(f"unknown fault class {f.kind!r}; choose from {', '.join(FAULT_CLASSES)}")
    if f.kind == "disconnect":  # its target is a node of the job, at a time from the job's start
        if f.at_s is None or not f.at_s > 0:
            raise PlanError(f"fault {f.spell()}: spell it disconnect:<node>@<seconds>s, e.g. disconnect:1@5s")
        if not 0 <= f.rank < plan.nnodes:
            raise PlanError(f"fault {f.spell()}: node {f.rank} is beyond the job's {plan.nnodes} nodes")
        return
    if not 0 <= f.rank < plan.world:
        raise PlanError(f"fault target rank {f.rank} is beyond the world of {plan.world} ranks (0..{plan.world - 1})")
    if f.at_s is not None:
        if f.kind != "kill" or not f.at_s > 0:
            raise PlanError(f"wall-clock fault {f.spell()}: only kills, at a time > 0 s from the job's start")
    elif not 0 < f.step < plan.steps:
        raise PlanError(f"fault step {f.step} is outside the run's steps 1..{plan.steps - 1}")


def check_writable(workdir: str) -> None:
    """The checkpoint directory exists or can be made, and a file can be written in it."""
    if not workdir:
        raise PlanError("no checkpoint directory given")
    try:
        os.makedirs(workdir, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=workdir, prefix=".probe"):
            pass
    except OSError as e:
        raise PlanError(f"checkpoint directory {workdir} cannot be written: {e.strerror or e}") from None
