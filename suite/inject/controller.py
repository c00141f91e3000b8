"""The controller: a process beside the ranks that applies a run's injection at its onset and reverts it at the
end of its stretch, at the run's end, and whenever the controller exits.

    python -m suite.inject.controller RUN_DIR TORCHRUN_PID

The launcher starts it (suite/inject/launcher.py) with the plan already in this host's truth file
(suite/inject/truth.py). It finds the target among torchrun's children by their ``RANK`` once its session has
started (its journal's ring file, ``<run>/hang/rank<r>.ring``, appears); the onset counts from the target's first
timed sample (suite/common/timed_start.py: a training case's first timed step), an onset of 0 from its session's
start (``Stint.anchored``). A target on
another host is left to that host's controller. It records in the truth file when it applied and reverted the
injection (Unix time), and ends when torchrun or the launcher does.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil

from . import registry, truth
from .stint import POLL_S, Stint
from .kind import Target


def find_rank(torchrun_pid: int, rank: int) -> psutil.Process | None:
    """The process of ``rank`` among torchrun's descendants (the outermost with that RANK: a rank's own children
    inherit it)."""
    try:
        procs = psutil.Process(torchrun_pid).children(recursive=True)
    except psutil.Error:
        return None
    mine = []
    for p in procs:
        try:
            if p.environ().get("RANK") == str(rank):
                mine.append(p)
        except psutil.Error:
            continue
    pids = {p.pid for p in mine}
    return next((p for p in mine if p.ppid() not in pids), None)


def _target(proc: psutil.Process, rank: int) -> Target:
    try:
        cores = frozenset(proc.cpu_affinity())
    except (psutil.Error, AttributeError):
        cores = frozenset()
    return Target(rank, proc.pid, cores)


class Run(Stint):
    """The controller's state: the plan, what it did and when, written to the truth file as it goes."""

    def __init__(self, run_dir: Path, torchrun_pid: int) -> None:
        super().__init__(run_dir, json.loads(truth.path(run_dir).read_text()))
        self.torchrun_pid, self.parent = torchrun_pid, os.getppid()
        self.plan = self.record["plan"]
        self.cls = registry.discover()[self.plan["cls"]]

    def alive(self) -> bool:
        return not self.stopping and os.getppid() == self.parent and psutil.pid_exists(self.torchrun_pid)

    def run(self) -> None:
        if not self.cls.local:  # a node's class: the host's controller acts (suite/inject/host.py)
            self.note(here=False)
            return
        rank = self.plan["target"]
        ring = self.run_dir / "hang" / f"rank{rank}.ring"
        proc = None
        while self.alive() and (proc is None or not ring.exists()):
            proc = proc or find_rank(self.torchrun_pid, rank)
            time.sleep(POLL_S)
        if proc is None or not self.alive():
            self.note(here=False)  # the target ran on another host, or the run ended first
            return

        def start():  # the target read at the onset (its cores then)
            return self.cls.start(_target(proc, rank), self.plan["severity"])

        anchor = self.anchored(rank, self.plan["onset_s"])
        if anchor is None:
            self.note(here=True, pid=proc.pid)  # the run ended before the target's timed steps began
            return
        self.apply(anchor, self.plan["onset_s"], self.plan["duration_s"], start, pid=proc.pid)


def main(argv: list[str]) -> int:
    run = Run(Path(argv[0]), int(argv[1]))

    def ending(_signum, _frame):
        run.stopping = True

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, ending)
    try:
        run.run()
    finally:
        run.revert()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
