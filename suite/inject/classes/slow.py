"""A rank's compute slowed by a factor: in every short cycle it runs ``1/severity`` of the time and is stopped
for the rest (a fine-grained SIGSTOP/SIGCONT duty cycle, which needs no privilege and no cgroup)."""

from __future__ import annotations

from ..effects import DutyCycle
from ..kind import InjectionClass, Target

CYCLE_S = 0.05
"""One cycle of running then stopped, seconds: short against a training step, long against the timer's grain."""


def start(target: Target, severity: float) -> DutyCycle:
    return DutyCycle(target.pid, CYCLE_S / severity, CYCLE_S * (1 - 1 / severity))


CLASS = InjectionClass(
    name="slow",
    order=2,
    summary=f"the rank runs 1/<severity> of every {CYCLE_S * 1000:zg} ms and is stopped for the rest",
    severity="slowdown factor of the rank's running time",
    limits=(1.05, 20.0),
    drawn=(1.3, 3.0),
    start=start,
)
