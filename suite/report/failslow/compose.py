"""The fail-slow bench's trials on the compose simulation (``make failslow-bench FAILSLOW_COMPOSE=1``): each trial
is one ``docker/compose-run.sh`` run of NNODES containers of NPROC_PER_NODE ranks, its knobs (the watched case,
its steps, the injection) passed as the simulation takes them, in its environment. The node classes (a node's
egress rate, its CPU quota) are drawn there too: the host's controller applies them (suite/inject/host.py).

A trial's knobs are ``KEY=VALUE`` words (mk/failslow.mk writes them from the bench's knobs); ``knobs`` refuses
anything else with one line, before the first trial runs.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from suite.errors import ConfigError

SCRIPT = "docker/compose-run.sh"


@dataclass(frozen=True)
class Sim:
    """The simulation a bench's trials run on: ``nnodes`` containers of ``per_node`` ranks."""

    nnodes: int
    per_node: int

    @property
    def world(self) -> int:
        return self.nnodes * self.per_node


def simulation(nnodes: str, per_node: str) -> Sim | None:
    """The simulation of ``--compose-nodes``/``--nproc-per-node`` (None: ``0``, the trials run on local ranks);
    ConfigError: one line naming the knob."""
    try:
        n, p = int(nnodes), int(per_node)
    except ValueError:
        raise ConfigError(
            f"NNODES={nnodes!r} / NPROC_PER_NODE={per_node!r}: whole numbers (FAILSLOW_COMPOSE=1)"
        ) from None
    if n == 0:
        return None
    if n < 2 or p < 1:
        raise ConfigError(
            f"NNODES={n}, NPROC_PER_NODE={p}: the compose bench needs 2 or more nodes of 1 or more ranks "
            "(a slow node beside its peers)"
        )
    return Sim(n, p)


def knobs(text: str, what: str) -> dict[str, str]:
    """The ``KEY=VALUE`` words of a trial's knobs (shell-quoted values kept whole)."""
    out = {}
    for word in shlex.split(text):
        key, eq, value = word.partition("=")
        if not eq or not key.isidentifier():
            raise ConfigError(f"{what}: {word!r} is not KEY=VALUE (the compose simulation takes its knobs so)")
        out[key] = value
    return out


def launch(sim: Sim, folder: Path, run_id: str, args: str, env: dict) -> tuple[list[str], dict]:
    """(the command, its environment) of one trial on the simulation: its results in ``<folder>/<run_id>``."""
    env = (
        env
        | knobs(args, "--trial-args")
        | {
            "NNODES": str(sim.nnodes),
            "NPROC_PER_NODE": str(sim.per_node),
            "RESULTS_DIR": str(Path(folder).resolve()),
            "RUN_ID": run_id,
        }
    )
    return [SCRIPT], env
