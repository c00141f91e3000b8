"""The host's controller of the compose simulation: it applies a node class (one with a ``node`` effect: a node's
egress rate, its CPU quota) to the node of the target rank, through docker, at the onset, and reverts it at the end
of its stretch, and whenever it is ended.

    python -m suite.inject.host RUN_DIR PROJECT NPROC_PER_NODE NNODES

docker/compose-run.sh starts it beside the nodes with the run's INJECT, SEED and INJECT_RUN_S, and ends it (SIGTERM)
once they have stopped. ``RUN_DIR`` is the run's folder on the host (the nodes' ``/results/<run>``). The onset
counts from the target rank's first timed sample, as a node's own controller counts it (``Stint.anchored``).
The truth goes to ``<run>/truth/injections-compose-host.json``; a node's own controller notes ``here: false``.
Any other plan (none, a class of ranks) is left to the nodes: it ends at once, status 0; bad input: one line,
status 2.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from pathlib import Path

from suite.errors import ConfigError

from . import plan, registry
from .effects import docker
from .kind import Node
from .stint import POLL_S, Stint

HOST = "compose-host"
"""The truth file's host name."""
CHECK_S = 1.0
"""How often it asks docker for the node's container until it exists, then whether it still runs (it ends with
it)."""


def container_of(project: str, service: str) -> str | None:
    """The id of ``service``'s container of compose project ``project`` (None: not created yet)."""
    out = docker(
        "ps", "-q", "--filter", f"label=com.docker.compose.project={project}", "--filter",
        f"label=com.docker.compose.service={service}",
    )  # fmt: skip
    return out.split()[0] if out.split() else None


class Host(Stint):
    host = HOST

    def __init__(self, run_dir: Path, project: str, found: plan.Plan, nproc: int, world: int) -> None:
        self.node_name = f"node{found.target // nproc}"
        super().__init__(run_dir, {"plan": found.as_dict(), "host": HOST, "node": self.node_name, "world_size": world})
        self.project, self.plan = project, found
        self.checked, self.container = 0.0, None

    def alive(self) -> bool:
        if self.stopping:
            return False
        if self.container is not None and time.monotonic() - self.checked > CHECK_S:
            self.checked = time.monotonic()
            try:
                return docker("inspect", "-f", "{{.State.Running}}", self.container).strip() == "true"
            except RuntimeError:
                return False
        return True

    def run(self, cls) -> None:
        ring = self.run_dir / "hang" / f"rank{self.plan.target}.ring"
        while self.alive() and (self.container is None or not ring.exists()):
            if self.container is None:  # docker asked at most every CHECK_S
                self.container = container_of(self.project, self.node_name)
            time.sleep(POLL_S if self.container is not None else CHECK_S)
        if not self.alive():
            self.note(here=False)  # the run ended first
            return
        start = functools.partial(cls.node, Node(self.node_name, self.container), self.plan.severity)
        anchor = self.anchored(self.plan.target, self.plan.onset_s)
        if anchor is None:
            self.note(here=False)  # the run ended before the target's timed steps began
            return
        self.apply(anchor, self.plan.onset_s, self.plan.duration_s, start, container=self.container)


def main(argv: list[str]) -> int:
    run_dir, project, nproc, nnodes = Path(argv[0]), argv[1], int(argv[2]), int(argv[3])
    try:
        found = plan.from_env({**os.environ, plan.COMPOSE_FLAG: "1"}, nproc * nnodes)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cls = registry.discover()[found.cls] if found is not None else None
    if cls is None or cls.node is None:
        return 0
    host = Host(run_dir, project, found, nproc, nproc * nnodes)

    def ending(_signum, _frame):
        host.stopping = True

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, ending)
    try:
        host.run(cls)
    except RuntimeError as e:  # docker refused: said once, the run goes on unharmed
        print(f"# inject: {e}", file=sys.stderr)
    finally:
        host.revert()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
