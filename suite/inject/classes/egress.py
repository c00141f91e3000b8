"""A node's egress rate cut in the compose simulation: the link shaping of docker/link.sh (a tbf qdisc on the
node's interface, under its netem delay where it has one) changed mid-run to ``severity`` Mbit/s, from the host
(``docker exec`` as root: the container has NET_ADMIN). ``stop`` puts back the rate from before (LINK_RATE,
LINK_RATES), or removes the qdisc where the link had no rate."""

from __future__ import annotations

import re
import time

from ..effects import docker
from ..kind import InjectionClass, Node

IFACE = "eth0"
"""The simulation network's interface in every node (docker/link.sh's LINK_IFACE default, GLOO_SOCKET_IFNAME)."""
TBF = re.compile(r"^qdisc tbf \S+ .*\brate (\S+) burst (\S+)", re.M)


def burst_bytes(mbit: float) -> int:
    """docker/link.sh's burst: half a millisecond of traffic at the rate, at least 4 KiB."""
    return max(4096, int(mbit * 1e6 / 8 / 2000))


def where(shown: str) -> list[str]:
    """Where the link's tbf goes, from ``tc qdisc show``: the root, or under the netem delay (docker/link.sh)."""
    return (
        ["parent", "1:1", "handle", "10:"]
        if re.search(r"^qdisc netem 1: root", shown, re.M)
        else ["root", "handle", "1:"]
    )


class Rate:
    """``node``'s egress limited to ``mbit`` Mbit/s until ``stop``."""

    how = "tc tbf"

    def __init__(self, node: Node, mbit: float) -> None:
        self.node = node
        shown = self._tc("qdisc", "show", "dev", IFACE)
        self.where, self.before = where(shown), TBF.search(shown)
        self.began_unix = time.time()  # the rate changes during the call (seconds on a loaded host)
        self._tc("qdisc", "replace", "dev", IFACE, *self.where, *tbf(f"{mbit:zg}mbit", f"{burst_bytes(mbit)}b"))

    def _tc(self, *args: str) -> str:
        return docker("exec", "-u", "0", self.node.container, "tc", *args)

    def stop(self) -> None:
        try:
            if self.before is not None:
                self._tc("qdisc", "replace", "dev", IFACE, *self.where, *tbf(self.before[1], self.before[2]))
            else:
                self._tc("qdisc", "del", "dev", IFACE, *(["root"] if self.where[0] == "root" else self.where))
        except RuntimeError:
            pass  # the container is gone


def tbf(rate: str, burst: str) -> list[str]:
    return ["tbf", "rate", rate, "burst", burst, "latency", "50ms"]


CLASS = InjectionClass(
    name="egress",
    order=7,
    summary="the target rank's node's egress cut to <severity> Mbit/s (its tc shaping changed mid-run, from the host)",
    severity="egress rate, Mbit/s",
    limits=(1, 100_000),
    drawn=(10, 50),
    node=Rate,
)
