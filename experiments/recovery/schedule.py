"""The seeded fault schedule: spelled faults (``kill:1@5``: SIGKILL of rank 1 when it reaches step 5) and a
Poisson schedule at a compressed mean time between failures, counted in training steps (the run's clock that
does not depend on the machine). Pure logic, no torch; the same seed gives the same schedule.

Spelling (comma-separated, RECOVERY_FAULTS): ``<class>:<rank>@<step>`` with class kill, stop or disconnect;
``poisson:<mtbf>`` draws failures (class kill, a seeded random rank) with exponential gaps of mean ``mtbf``
steps over the run; ``none`` is the fault-free run.
"""

from __future__ import annotations

import random

from .plan import FAULT_CLASSES, Fault, PlanError

POISSON = "poisson"


def parse_faults(text: str, *, world: int, steps: int, seed: int) -> tuple[Fault, ...]:
    """The schedule a RECOVERY_FAULTS value spells, ordered by step; PlanError names what is wrong."""
    out: list[Fault] = []
    for item in (t.strip() for t in text.split(",")):
        if item in ("", "none"):
            continue
        kind, _, rest = item.partition(":")
        if kind == POISSON:
            out += poisson_faults(seed=seed, mtbf=_number(rest, item), steps=steps, world=world)
            continue
        if kind not in FAULT_CLASSES:
            raise PlanError(
                f"unknown fault class {kind!r} in {item!r}; choose from {', '.join(FAULT_CLASSES)}, poisson"
            )
        rank, at, step = rest.partition("@")
        if not at:
            raise PlanError(f"fault {item!r}: spell it <class>:<rank>@<step>, e.g. kill:1@5")
        out.append(Fault(kind=kind, rank=int(_number(rank, item)), step=int(_number(step, item))))
    return ordered(out)


def _number(text: str, item: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise PlanError(f"fault {item!r}: {text!r} is not a number") from None
    if v < 0 or v != v:
        raise PlanError(f"fault {item!r}: {text!r} must be >= 0")
    return v


def ordered(faults: list[Fault]) -> tuple[Fault, ...]:
    """By step; two faults at one step cannot both strike (the first restarts the job), so that is an error."""
    faults = sorted(faults, key=lambda f: f.step)
    for a, b in zip(faults, faults[1:]):
        if a.step == b.step:
            raise PlanError(f"two faults at step {a.step}: one attempt meets one fault; give them different steps")
    return tuple(faults)


def poisson_faults(*, seed: int, mtbf: float, steps: int, world: int) -> list[Fault]:
    """Failures with exponential gaps of mean ``mtbf`` steps over ``steps`` steps: one SIGKILL of a seeded random
    rank at each failure's step (at most one a step, since each one restarts the job; none at step 0)."""
    if not mtbf > 0:
        raise PlanError(f"poisson needs a mean time between failures > 0 steps, got {mtbf:zg}")
    rng = random.Random(seed)
    t, out, last = 0.0, [], 0
    while True:
        t += rng.expovariate(1.0 / mtbf)
        step = max(int(t), last + 1)
        if step >= steps:
            return out
        out.append(Fault(kind="kill", rank=rng.randrange(world), step=step))
        last = step
