"""A node's CPU quota cut in the compose simulation: ``docker update --cpus <severity>`` on its container, from
the host, as a noisy tenant or a throttled VM leaves a node fewer CPUs. ``stop`` gives it back its quota from
before (the run's ``NODE_CPUS``), or all of the host's CPUs where it had none (docker cannot unset ``--cpus``)."""

from __future__ import annotations

import os
import time

from ..effects import docker
from ..kind import InjectionClass, Node


class Cpus:
    """``node``'s container given ``cpus`` CPUs until ``stop``."""

    how = "docker update --cpus"

    def __init__(self, node: Node, cpus: float) -> None:
        self.node = node
        nano = int(docker("inspect", "-f", "{{.HostConfig.NanoCpus}}", node.container).strip() or 0)
        self.before = nano / 1e9 if nano > 0 else float(os.cpu_count() or 1)
        self.began_unix = time.time()  # the quota changes during the call (seconds on a loaded host)
        docker("update", "--cpus", f"{cpus:zg}", node.container)

    def stop(self) -> None:
        try:
            docker("update", "--cpus", f"{self.before:zg}", self.node.container)
        except RuntimeError:
            pass  # the container is gone


CLASS = InjectionClass(
    name="nodecpu",
    order=6,
    summary="the target rank's node's container left <severity> CPUs (docker update --cpus, from the host)",
    severity="CPUs left to the node",
    limits=(0.05, 64.0),
    drawn=(0.2, 0.8),
    node=Cpus,
)
