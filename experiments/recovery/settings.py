"""The recovery experiment's knobs (make variables RECOVERY_*), nested in the run's config as ``cfg.recovery``."""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field

from suite.api import ConfigError

from .plan import RDZV_PORT, STRATEGIES, STRETCH_TIMES, Fault, Plan, PlanError, check_plan, spans
from .schedule import KEPT, keeps_one, parse_faults


COMPOSE_FLAG = "COMPOSE_SIM"
"""Set to 1 on every node of the compose simulation (docker-compose.yml): the elastic job spans the nodes."""


@dataclass(frozen=True, kw_only=True)
class RecoverySettings:
    """The recovery experiment's knobs."""

    strategies: tuple[str, ...] = field(default=tuple(STRATEGIES), metadata={"env": "RECOVERY_STRATEGIES"})
    """RECOVERY_STRATEGIES: elastic (torchrun restarts from DCP checkpoints), torchft (live recovery from a peer;
    kills and stops, one replica group left alone), or both (experiments/recovery/strategies.py)."""
    faults: tuple[str, ...] = field(default=("kill:1@6", "stop:1@6"), metadata={"env": "RECOVERY_FAULTS"})
    """RECOVERY_FAULTS: one schedule per case: ``kill:<rank>@<step>``, ``stop:<rank>@<step>``, ``poisson:<mtbf>``
    (mean steps between failures), ``poisson:<mtbf>s`` or ``kill:<rank>@<t>s`` (wall-clock seconds from the
    job's start; torchft counts them from its first step) or ``none`` (experiments/recovery/schedule.py)."""
    steps: int = field(default=10, metadata={"env": "RECOVERY_STEPS"})
    """RECOVERY_STEPS: training steps of each run."""
    ckpt_every: int = field(default=4, metadata={"env": "RECOVERY_CKPT_EVERY"})
    """RECOVERY_CKPT_EVERY: a checkpoint every this many steps."""
    ckpt_modes: tuple[str, ...] = field(default=("sync",), metadata={"env": "RECOVERY_CKPT_MODES"})
    """RECOVERY_CKPT_MODES: sync (dcp.save), async (dcp.async_save), or both."""
    world: int = field(default=2, metadata={"env": "RECOVERY_WORLD"})
    """RECOVERY_WORLD: ranks of the recovered job (its own torchrun sub-job)."""
    seed: int = field(default=0, metadata={"env": "RECOVERY_SEED"})
    """RECOVERY_SEED: the model's weights, the data order and the Poisson schedule."""
    timeout_s: int = field(default=3, metadata={"env": "RECOVERY_TIMEOUT_S"})
    """RECOVERY_TIMEOUT_S: the job's collective timeout in whole seconds (a stopped rank is lost after it)."""
    ckpt_dir: str = field(default="", metadata={"env": "RECOVERY_DIR"})
    """RECOVERY_DIR: where the checkpoints and event files go (empty: a new folder under the system's temporary
    folder)."""
    repeats: int = field(default=1, metadata={"env": "RECOVERY_REPEATS"})
    """RECOVERY_REPEATS: runs of each case (the same schedule each time); the table gives each measure's median
    and its spread over them."""
    bug: str = field(default="", metadata={"env": "RECOVERY_BUG"})
    """RECOVERY_BUG: a planted recovery bug, ``older_ckpt`` (restores an older checkpoint than it claims) or
    ``older_ckpt_rank1`` (rank 1 alone does)."""

    def schedules(self) -> list[tuple[str, tuple[Fault, ...]]]:
        """Each RECOVERY_FAULTS item and the faults it spells."""
        return [(t, self.schedule(t)) for t in self.faults]

    def schedule(self, text: str, keep: int | None = None) -> tuple[Fault, ...]:
        """The faults one RECOVERY_FAULTS item spells; ``keep``: a rank its Poisson draws leave alone."""
        return parse_faults(text, world=self.world, steps=self.steps, seed=self.seed, keep=keep)

    def job_nodes(self) -> int:
        """The elastic job's nodes: in the compose simulation (COMPOSE_SIM=1) with a folder every node sees
        (RECOVERY_DIR, which compose-run.sh sets where the run's experiments name recovery), one per node of the run
        (NNODES), at most one per rank of the job; elsewhere 1 (a torchrun sub-job on this machine)."""
        if os.environ.get(COMPOSE_FLAG) != "1" or not self.ckpt_dir:
            return 1
        try:
            return max(1, min(int(os.environ.get("NNODES", "1")), self.world))
        except ValueError:
            return 1

    def plan(self, faults: tuple[Fault, ...], ckpt_mode: str, workdir: str, *, spanning: bool = False, **model) -> Plan:
        """The plan of one case; ``spanning``: the elastic job, across the compose nodes where there are some;
        ``model``: SHARDED_MODEL's factory and its batch per rank (``model``, ``batch_per_rank``; none: the MLP)."""
        nnodes = self.job_nodes() if spanning and spans(faults) else 1
        return Plan(
            **model,
            steps=self.steps,
            seed=self.seed,
            world=self.world,
            faults=faults,
            ckpt_every=self.ckpt_every,
            ckpt_mode=ckpt_mode,
            workdir=workdir,
            timeout_s=self.timeout_s,
            bug=self.bug,
            nnodes=nnodes,
            rdzv_endpoint=f"{os.environ.get('MASTER_ADDR', 'node0')}:{RDZV_PORT}" if nnodes > 1 else "",
        )

    def validate(self) -> None:
        """Raise ConfigError with the one line to show (exit 2 before any rank starts)."""
        unknown = [x for x in self.strategies if x not in STRATEGIES]
        if unknown or not self.strategies:
            raise ConfigError(
                f"RECOVERY_STRATEGIES: unknown {unknown or 'none given'}; choose from {', '.join(STRATEGIES)}"
            )
        if self.repeats < 1:
            raise ConfigError(f"RECOVERY_REPEATS: runs of each case must be >= 1, got {self.repeats}")
        chosen = [STRATEGIES[x] for x in self.strategies]
        spanning = any(st.spans_nodes for st in chosen)
        try:
            schedules = self.schedules()
            cut = os.environ.get(COMPOSE_FLAG) == "1" and any(f.kind == "disconnect" for _, fs in schedules for f in fs)
            if spanning and cut and not self.ckpt_dir:
                raise ConfigError(
                    "RECOVERY_DIR: a disconnect needs the job across the compose nodes; name a folder every node sees"
                )
            for _, faults in schedules:
                for mode in self.ckpt_modes:
                    check_plan(self.plan(faults, mode, self.ckpt_dir or tempfile.gettempdir(), spanning=spanning))
            if any(st.heals_from_peer for st in chosen):  # one replica group no fault strikes, the live peer
                for text in self.faults:
                    keeps_one(self.schedule(text, keep=KEPT), self.world)
        except PlanError as e:
            raise ConfigError(f"RECOVERY: {e}") from None

    def validate_against(self, cfg) -> None:
        """Raise ConfigError (one line) where these knobs cannot run with the run's own (``cfg``). A disconnect holds
        a compose node off the network, the suite's ranks on it with the job's, for up to ``STRETCH_TIMES[1]``
        times RECOVERY_TIMEOUT_S: the suite's heartbeat (HEARTBEAT_S, unless 0: off) must outlast that, or the run
        ends for a lost rank. A stop holds a rank of the job alone, a process the suite's heartbeat does not watch:
        its hold is bounded from below only (past the job's timeout, schedule.stop_seconds)."""
        hb = cfg.heartbeat_timeout_s
        longest = STRETCH_TIMES[1] * self.timeout_s
        cut = any(f.kind == "disconnect" for _, fs in self.schedules() for f in fs)
        if cut and hb > 0 and longest >= hb and any(STRATEGIES[x].spans_nodes for x in self.strategies):
            most = math.ceil(hb / STRETCH_TIMES[1]) - 1
            raise ConfigError(
                f"RECOVERY_TIMEOUT_S={self.timeout_s}: a disconnect holds a node off the network for up to "
                f"{longest:zg} s ({STRETCH_TIMES[1]:zg} x RECOVERY_TIMEOUT_S), which must stay under HEARTBEAT_S="
                f"{hb:zg} (the suite's ranks on it are lost after it); use RECOVERY_TIMEOUT_S <= {most} or a longer "
                f"HEARTBEAT_S"
            )
