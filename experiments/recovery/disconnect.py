"""The ``disconnect`` fault's host side: a compose node leaves the simulation's network for a seeded stretch,
then joins it again under its service name (docker's DNS name for it), as a cable pulled and plugged back.

    python -m experiments.recovery.disconnect PROJECT NNODES disconnect:<node>@<seconds>s [--seed S]
        [--timeout-s T] [--out FILE]

At ``<seconds>`` from its start it runs ``docker network disconnect`` on node ``<node>``'s container of compose
project PROJECT, and ``docker network connect --alias node<node>`` after the stretch (always, also when it is
ended by SIGTERM or SIGINT). The stretch is drawn from the seed, between 1.5 and 3 times the job's collective
timeout ``T``, so that the job takes the node for lost. The fault's truth (node, container, network, drawn and
actual times) goes to FILE as JSON (default: stdout). Bad input, one line and status 2 before anything is done:
a fault spelled wrong, a node beyond NNODES, no compose project (a disconnect outside compose), no container of
the node in it.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import sys
import time
from dataclasses import asdict, dataclass

from suite.api import container_of, docker

from .plan import PlanError

SPELLING = re.compile(r"^disconnect:(\d+)@(\d+(?:\.\d*)?)s$")


@dataclass(frozen=True)
class Disconnect:
    node: int
    at_s: float
    stretch_s: float


def parse(text: str, *, nnodes: int, seed: int, timeout_s: float) -> Disconnect:
    """The fault ``text`` spells, its stretch drawn from ``seed``; PlanError (one line) for bad input."""
    m = SPELLING.match(text.strip())
    if not m:
        raise PlanError(f"fault {text!r}: spell it disconnect:<node>@<seconds>s, e.g. disconnect:1@5s")
    node, at_s = int(m.group(1)), float(m.group(2))
    if not 0 <= node < nnodes:
        raise PlanError(f"fault {text!r}: node {node} is beyond the compose cluster's {nnodes} nodes (0..{nnodes - 1})")
    if not timeout_s > 0:
        raise PlanError(f"the collective timeout must be > 0 s, got {timeout_s}")
    return Disconnect(node=node, at_s=at_s, stretch_s=round(random.Random(seed).uniform(1.5, 3.0) * timeout_s, 3))


def run_docker(*args: str) -> str:
    """``docker ARGS``' output; PlanError (one line) where it fails."""
    try:
        return docker(*args).strip()
    except (RuntimeError, OSError) as e:
        raise PlanError(str(e).splitlines()[0]) from None


def locate(project: str, node: int) -> tuple[str, str]:
    """The container of ``node<node>`` in compose project ``project`` and the network it is on."""
    if not project:
        raise PlanError("a disconnect fault needs the compose cluster: no compose project given")
    try:
        container = container_of(project, f"node{node}")
    except (RuntimeError, OSError) as e:
        raise PlanError(str(e).splitlines()[0]) from None
    if container is None:
        raise PlanError(f"a disconnect fault needs the compose cluster: compose project {project!r} runs no node{node}")
    nets = run_docker("inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", container).split()
    if len(nets) != 1:
        raise PlanError(f"node{node}'s container is on {len(nets)} networks ({' '.join(nets)}); one expected")
    return container, nets[0]


def strike(d: Disconnect, container: str, network: str, t0: float) -> dict:
    """Disconnect at ``t0 + at_s``, reconnect after the stretch (also on SIGTERM/SIGINT); the fault's truth."""
    truth = {**asdict(d), "container": container, "network": network}
    ended = []

    def on_signal(signum, frame):
        ended.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not ended and time.time() < t0 + d.at_s:
            time.sleep(0.02)
        if ended:
            return {**truth, "struck": False}
        run_docker("network", "disconnect", network, container)
        truth["t_disconnect"] = time.time() - t0
        try:
            while not ended and time.time() < t0 + truth["t_disconnect"] + d.stretch_s:
                time.sleep(0.02)
        finally:
            run_docker("network", "connect", "--alias", f"node{d.node}", network, container)
            truth["t_reconnect"] = time.time() - t0
        return {**truth, "struck": True}
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.recovery.disconnect", description=__doc__.split("\n")[0])
    ap.add_argument("project")
    ap.add_argument("nnodes", type=int)
    ap.add_argument("fault")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout-s", type=float, default=3.0)
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    t0 = time.time()
    try:
        d = parse(a.fault, nnodes=a.nnodes, seed=a.seed, timeout_s=a.timeout_s)
        container, network = locate(a.project, d.node)
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    truth = json.dumps(strike(d, container, network, t0))
    if a.out:
        with open(a.out, "w") as f:
            f.write(truth + "\n")
    else:
        print(truth)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
