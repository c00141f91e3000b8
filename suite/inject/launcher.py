"""The launcher's side of an injection: the plan checked before any rank starts (``check``), its knobs kept from
the ranks, its truth written and its controller started beside torchrun (``begin``, ``Controller``).

Without INJECT every step is a no-op. The launcher calls ``check`` with the other knobs (exit 2 on bad input),
and suite/launch/supervise.py calls ``begin`` before it starts torchrun, ``poll`` while it waits for torchrun
(the first starts the controller) and ``end`` when the ranks have ended.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

import psutil

from . import truth
from .plan import Plan, from_env

KNOBS = ("INJECT", "SEED", "INJECT_RUN_S")
"""The environment variables of the plan: read here only, removed from the ranks' environment."""
ROOT = Path(__file__).resolve().parents[2]


def check(env: Mapping[str, str], world_size: int) -> Plan | None:
    """The plan, or ConfigError (one line: the launcher exits 2 before any rank starts)."""
    return from_env(env, world_size)


class Controller:
    """The controller process of a run (suite/inject/controller.py), or nothing where the run has no plan."""

    def __init__(self, run_dir: Path, plan: Plan | None) -> None:
        self.run_dir, self.plan = run_dir, plan
        self.proc: subprocess.Popen | None = None
        self.torchrun_pid: int | None = None

    def poll(self, torchrun_pid: int) -> None:
        """Start the controller beside torchrun at the first call (in the launcher's process group: a Ctrl-C reaches
        it too); later, resume the ranks if it died while they run (killed): it may have left its target stopped."""
        if self.plan is None:
            return
        if self.torchrun_pid is None:
            self.torchrun_pid = torchrun_pid
            cmd = [sys.executable, "-m", "suite.inject.controller", str(self.run_dir), str(torchrun_pid)]
            self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL)
        elif self.proc is not None and self.proc.poll() is not None:
            self.proc = None
            self._resume_ranks()

    def end(self) -> None:
        """Stop the controller (it reverts what it applied), and resume every rank whatever happened to it."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        self._resume_ranks()

    def _resume_ranks(self) -> None:
        if self.torchrun_pid is None:
            return
        try:
            procs = psutil.Process(self.torchrun_pid).children(recursive=True)
        except psutil.Error:
            return
        for p in procs:
            try:
                if p.status() == psutil.STATUS_STOPPED:
                    p.resume()
            except psutil.Error:
                continue


def begin(env: MutableMapping[str, str], run_dir: Path, world_size: int) -> Controller:
    """The run's controller (not started yet): the plan read from ``env`` and its knobs removed from it (the ranks
    get ``env``), the plan written to this host's truth file."""
    plan = check(env, world_size) if world_size else None
    for k in KNOBS:
        env.pop(k, None)
    if plan is not None:
        truth.write(run_dir, {"plan": plan.as_dict(), "host": socket.gethostname(), "world_size": world_size})
    return Controller(run_dir, plan)
