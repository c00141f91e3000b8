"""A rank paused periodically, as a garbage collector's stop-the-world pauses do: after each second it runs,
it is stopped (SIGSTOP) for ``severity`` seconds and resumed (SIGCONT)."""

from __future__ import annotations

from ..effects import DutyCycle
from ..kind import InjectionClass, Target

RUN_S = 1.0
"""Seconds the rank runs between two pauses."""


def start(target: Target, severity: float) -> DutyCycle:
    return DutyCycle(target.pid, RUN_S, severity)


CLASS = InjectionClass(
    name="pause",
    order=1,
    summary=f"the rank is stopped for <severity> s after every {RUN_S:zg} s it runs (SIGSTOP/SIGCONT)",
    severity="pause length, seconds",
    limits=(0.01, 10.0),
    drawn=(0.2, 1.0),
    start=start,
)
