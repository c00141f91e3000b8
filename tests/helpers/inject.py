"""What the injector's unit tests share: a stand-in for torchrun with two ranks, and a bounded wait."""

from __future__ import annotations

import time

import psutil

from tests.conftest import ROOT

__all__ = ["FAKE_TORCHRUN", "ROOT", "until"]

WAIT_S = 30  # a bound on waiting for a process's state, not a speed target


def until(cond, what: str) -> None:
    end = time.monotonic() + WAIT_S
    while not cond():
        assert time.monotonic() < end, f"still not {what} after {WAIT_S} s"
        time.sleep(0.02)


FAKE_TORCHRUN = """
import os, subprocess, sys, time
rank = "import time\\nfor _ in range(20000):\\n    sum(range(20000))\\n    time.sleep(0.005)"
kids = [subprocess.Popen([sys.executable, "-c", rank], env={**os.environ, "RANK": str(r)}) for r in range(2)]
time.sleep(120)
"""
"""A stand-in for torchrun: two ranks that, as training ranks do, run (a millisecond) and wait (5 ms) in turn (the
injector's ``pause`` stops a rank as it runs), for about two minutes."""


def end_fake_launch(fake, ctl) -> None:
    """Kill FAKE_TORCHRUN's ranks and itself, and end the controller ``ctl`` if it still runs (a test's cleanup)."""
    for p in psutil.Process(fake.pid).children():
        p.kill()
    fake.kill()
    fake.wait()
    if ctl.proc is not None:
        ctl.end()
