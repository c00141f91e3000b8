"""A rank paused periodically, as a garbage collector's stop-the-world pauses do: after each ``RUN_S`` it runs,
it is stopped (SIGSTOP) for ``severity`` seconds and resumed (SIGCONT). Each stop waits for the rank's main thread
to run, not to sleep in a wait (at a collective, at the harness's barrier): a collector runs as the program
allocates. Stopped at any moment instead, a rank of a 2-rank DDP run on this loaded 2-core machine was stopped
outside its compute 3 times in 4 (docs/doctor.md), much of it in waits, where a pause holds every rank alike and
names no one; stopped as it runs, 15 of 21 pauses (two bench trials ``pause:1:5:0.4:20``) fell in its own compute
or its optimizer step, where its own time shows them (suite/watch/pauses.py ``held``), and 6 where every rank's
step grew alike (after its last gradient, before the all-reduce)."""

from __future__ import annotations

from ..effects import DutyCycle
from ..kind import InjectionClass, Target

RUN_S = 0.5
"""Seconds the rank runs between two pauses. The watch names a paused rank on ``pauses.EVENTS`` (4) pauses that its
own time shows, about 2 in 3 of them: a trial must hold 6 or more in the seconds of steps it has after its onset. A
bench trial whose first steps the load slowed has few of those (its steps fill ``FAILSLOW_BUDGET_S`` at the first
steps' speed): at 1 s between pauses such a trial held 5 pauses in all and went unnamed (in 2 of 11 soaked rounds of
the smoke at a load of 4 to 11); at 0.5 s it holds twice as many in the same seconds."""


def start(target: Target, severity: float) -> DutyCycle:
    return DutyCycle(target.pid, RUN_S, severity, running=True)


CLASS = InjectionClass(
    name="pause",
    order=1,
    summary=f"the rank is stopped for <severity> s after every {RUN_S:zg} s it runs, as it runs (SIGSTOP/SIGCONT)",
    severity="pause length, seconds",
    limits=(0.01, 10.0),
    drawn=(0.2, 1.0),
    start=start,
)
