"""The ``disconnect`` fault's host side: a compose node leaves the simulation's network for a seeded stretch,
then joins it again under its service name (docker's DNS name for it), as a cable pulled and plugged back.

    python -m experiments.recovery.disconnect PROJECT NNODES disconnect:<node>@<seconds>s [--seed S]
        [--timeout-s T] [--out FILE]
    python -m experiments.recovery.disconnect PROJECT NNODES --watch FOLDER

At ``<seconds>`` from its start it runs ``docker network disconnect`` on node ``<node>``'s container of compose
project PROJECT, and ``docker network connect --alias node<node>`` after the stretch (always, also when it is
ended by SIGTERM or SIGINT). The stretch is drawn from the seed, between 1.5 and 3 times the job's collective
timeout ``T``, so that the job takes the node for lost. The fault's truth (node, container, network, drawn and
actual times) goes to FILE as JSON (default: stdout). Bad input, one line and status 2 before anything is done:
a fault spelled wrong, a node beyond NNODES, no compose project (a disconnect outside compose), no container of
the node in it.

``--watch FOLDER`` (docker/compose-run.sh, while a compose run's recovery experiment runs): the host side of every
elastic job that spans the nodes under FOLDER (the host's side of RECOVERY_DIR). For each job's ``job.json``
(written by node 0 as it starts the job) it strikes the job plan's disconnects at their times from the job's first
committed step (as torchft counts its wall-clock faults: the ranks' start takes seconds, many more on a loaded
host), with the stretch drawn from the plan's seed and collective timeout, and writes each one's truth (``t0``: that
first step) to the job's ``truth/disconnect<i>.json``, which the job's scoring reads once the job has ended
(elastic.py). A disconnect whose time comes after the job's end (its ``ended``) is not struck (``struck`` false).
It ends at SIGTERM or SIGINT, connecting a node it holds off the network again first.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from suite.api import container_of, docker, write_json_atomic

from .plan import STRETCH_TIMES, PlanError

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
    return Disconnect(node=node, at_s=at_s, stretch_s=round(random.Random(seed).uniform(*STRETCH_TIMES) * timeout_s, 3))


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


def strike(d: Disconnect, container: str, network: str, t0: float, ended: Callable[[], bool]) -> dict:
    """Disconnect at ``t0 + at_s``, reconnect after the stretch (sooner once ``ended()``); the fault's truth."""
    truth = {**asdict(d), "container": container, "network": network}
    while not ended() and time.time() < t0 + d.at_s:
        time.sleep(0.02)
    if ended():
        return {**truth, "struck": False}
    run_docker("network", "disconnect", network, container)
    truth["t_disconnect"] = time.time() - t0
    try:
        while not ended() and time.time() < t0 + truth["t_disconnect"] + d.stretch_s:
            time.sleep(0.02)
    finally:
        run_docker("network", "connect", "--alias", f"node{d.node}", network, container)
        truth["t_reconnect"] = time.time() - t0
    return {**truth, "struck": True}


def job_disconnects(plan: dict, nnodes: int) -> list[Disconnect]:
    """A job plan's (plan.json's) disconnects, each with its stretch drawn from the plan's seed and timeout."""
    faults = [f for f in plan["faults"] if f["kind"] == "disconnect"]
    return [
        parse(f"disconnect:{f['rank']}@{f['at_s']}s", nnodes=nnodes, seed=plan["seed"] + i, timeout_s=plan["timeout_s"])
        for i, f in enumerate(faults)
    ]


def first_step(job: Path, ended: Callable[[], bool], poll_s: float = 0.05) -> float | None:
    """The wall-clock time of the job's first committed step (its ranks' event files), or None if it ends first."""
    while not ended():
        for p in (job / "events").glob("rank*.jsonl"):
            with open(p) as f:
                for line in f:
                    if '"kind": "commit"' in line and line.endswith("\n"):
                        return json.loads(line)["t"]
        time.sleep(poll_s)
    return None


def _strike_job(job: Path, project: str, nnodes: int, stopping: Callable[[], bool]) -> None:
    """Every disconnect of the job in folder ``job``, in turn, its time counted from the job's first step (its ranks'
    start takes seconds, more on a loaded host); each one's truth to ``truth/disconnect<i>.json``."""
    plan = json.loads((job / "plan.json").read_text())
    cuts = job_disconnects(plan, nnodes)
    (job / "truth").mkdir(exist_ok=True)
    ended = lambda: stopping() or (job / "ended").exists()  # noqa: E731
    t0 = first_step(job, ended) if cuts else None
    for i, d in enumerate(cuts):
        try:
            container, network = locate(project, d.node)
            truth = {**asdict(d), "struck": False} if t0 is None else strike(d, container, network, t0, ended)
        except PlanError as e:  # the job's scoring fails with it (measure.host_faults)
            truth = {**asdict(d), "struck": False, "error": str(e)}
        truth["t0"] = t0  # the clock's origin: the job's first step
        write_json_atomic(job / "truth" / f"disconnect{i}.json", truth)


def watch(folder: Path, project: str, nnodes: int, stopping: Callable[[], bool], poll_s: float = 0.05) -> None:
    """Strike the disconnects of each job started under ``folder`` (its ``job.json``) until ``stopping()``."""
    seen: set[Path] = set()
    strikers = []
    while not stopping():
        for req in sorted(folder.glob("**/job.json")):
            if req not in seen and not (req.parent / "ended").exists():
                seen.add(req)
                th = threading.Thread(target=_strike_job, args=(req.parent, project, nnodes, stopping), daemon=True)
                th.start()
                strikers.append(th)
        time.sleep(poll_s)
    for th in strikers:
        th.join()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.recovery.disconnect", description=__doc__.split("\n")[0])
    ap.add_argument("project")
    ap.add_argument("nnodes", type=int)
    ap.add_argument("fault", nargs="?", default="")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout-s", type=float, default=3.0)
    ap.add_argument("--out", default="")
    ap.add_argument("--watch", default="", metavar="FOLDER")
    a = ap.parse_args(argv)
    t0 = time.time()
    ended: list[int] = []
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda signum, frame: ended.append(signum))
    if a.watch:
        if a.fault:
            print("error: --watch takes its faults from the jobs' plans, not a fault argument", file=sys.stderr)
            return 2
        watch(Path(a.watch), a.project, a.nnodes, lambda: bool(ended))
        return 0
    try:
        d = parse(a.fault, nnodes=a.nnodes, seed=a.seed, timeout_s=a.timeout_s)
        container, network = locate(a.project, d.node)
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    truth = json.dumps(strike(d, container, network, t0, lambda: bool(ended)))
    if a.out:
        with open(a.out, "w") as f:
            f.write(truth + "\n")
    else:
        print(truth)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
