"""The seeded fault schedule: spelled faults (``kill:1@5``: SIGKILL of rank 1 when it reaches step 5) and a
Poisson schedule at a compressed mean time between failures, counted in training steps (the run's clock that
does not depend on the machine). Pure logic, no torch; the same seed gives the same schedule.

Spelling (comma-separated, RECOVERY_FAULTS): ``<class>:<rank>@<step>`` with class kill, stop or disconnect, or
``kill:<rank>@<seconds>s`` at a wall-clock time from the job's start;
``poisson:<mtbf>`` draws failures (class kill, a seeded random rank) with exponential gaps of mean ``mtbf``
steps over the run; ``poisson:<mtbf>s`` draws them in wall-clock seconds from the job's start, so that one can
strike during a restart (the elastic strategy's runner strikes them); ``none`` is the fault-free run.
"""

from __future__ import annotations

import math
import os
import random
import signal
import time

from .plan import FAULT_CLASSES, Fault, PlanError

POISSON = "poisson"


def parse_faults(text: str, *, world: int, steps: int, seed: int, keep: int | None = None) -> tuple[Fault, ...]:
    """The schedule a RECOVERY_FAULTS value spells, ordered by step; PlanError names what is wrong. ``keep``: a
    rank the Poisson schedule never strikes (None: it draws from every rank)."""
    out: list[Fault] = []
    for item in (t.strip() for t in text.split(",")):
        if item in ("", "none"):
            continue
        kind, _, rest = item.partition(":")
        if kind == POISSON and rest.endswith("s"):
            out += poisson_times(seed=seed, mtbf_s=_number(rest[:-1], item), world=world, keep=keep)
            continue
        if kind == POISSON:
            out += poisson_faults(seed=seed, mtbf=_number(rest, item), steps=steps, world=world, keep=keep)
            continue
        if kind not in FAULT_CLASSES:
            raise PlanError(
                f"unknown fault class {kind!r} in {item!r}; choose from {', '.join(FAULT_CLASSES)}, poisson"
            )
        rank, at, step = rest.partition("@")
        if not at:
            raise PlanError(f"fault {item!r}: spell it <class>:<rank>@<step>, e.g. kill:1@5")
        if step.endswith("s"):  # a wall-clock fault, seconds from the job's start
            out.append(Fault(kind=kind, rank=_whole(rank, item), step=0, at_s=_number(step[:-1], item)))
            continue
        out.append(Fault(kind=kind, rank=_whole(rank, item), step=_whole(step, item)))
    return ordered(out)


def _number(text: str, item: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise PlanError(f"fault {item!r}: {text!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise PlanError(f"fault {item!r}: {text!r} must be a finite number >= 0")
    return v


def _whole(text: str, item: str) -> int:
    """A rank or a step: a whole number >= 0 (``1.5`` is refused, not rounded to another rank)."""
    v = _number(text, item)
    if v != int(v):
        raise PlanError(f"fault {item!r}: {text!r} is not a whole number")
    return int(v)


def ordered(faults: list[Fault]) -> tuple[Fault, ...]:
    """By step; two faults at one step cannot both strike (the first restarts the job), so that is an error.
    Wall-clock faults go by their time, and come after the faults in steps (a plan refuses the mix)."""
    wall = sorted((f for f in faults if f.at_s is not None), key=lambda f: f.at_s)
    faults = sorted((f for f in faults if f.at_s is None), key=lambda f: f.step)
    for a, b in zip(faults, faults[1:]):
        if a.step == b.step:
            raise PlanError(f"two faults at step {a.step}: one attempt meets one fault; give them different steps")
    return (*faults, *wall)


WALL_HORIZON_S = 240.0
"""A wall-clock Poisson schedule's failures fall in the job's first this many seconds: a job still running then
(its mean time between failures shorter than its restarts) runs on without faults and ends."""


def _rank(rng: random.Random, world: int, keep: int | None) -> int:
    if keep is None or world < 2:
        return rng.randrange(world)
    rank = rng.randrange(world - 1)
    return rank + (rank >= keep)


def poisson_times(
    *, seed: int, mtbf_s: float, world: int, keep: int | None = None, horizon_s: float = WALL_HORIZON_S
) -> list[Fault]:
    """Failures at wall-clock times from the job's start, exponential gaps of mean ``mtbf_s`` seconds, up to
    ``horizon_s``: one SIGKILL of a seeded random rank (not ``keep``) each, whatever the rank is doing then."""
    if not mtbf_s > 0:
        raise PlanError(f"poisson needs a mean time between failures > 0 s, got {mtbf_s:zg}")
    rng = random.Random(seed)
    t, out = 0.0, []
    while True:
        t += rng.expovariate(1.0 / mtbf_s)
        if t >= horizon_s:
            return out
        out.append(Fault(kind="kill", rank=_rank(rng, world, keep), step=0, at_s=round(t, 3)))


def poisson_faults(*, seed: int, mtbf: float, steps: int, world: int, keep: int | None = None) -> list[Fault]:
    """Failures with exponential gaps of mean ``mtbf`` steps over ``steps`` steps: one SIGKILL of a seeded random
    rank at each failure's step (at most one a step, since each one restarts the job; none at step 0), drawn
    from every rank but ``keep`` when it is given (and the world has another)."""
    if not mtbf > 0:
        raise PlanError(f"poisson needs a mean time between failures > 0 steps, got {mtbf:zg}")
    rng = random.Random(seed)
    t, out, last = 0.0, [], 0
    while True:
        t += rng.expovariate(1.0 / mtbf)
        step = max(int(t), last + 1)
        if step >= steps:
            return out
        out.append(Fault(kind="kill", rank=_rank(rng, world, keep), step=step))
        last = step


def stop_seconds(timeout_s: float) -> float:
    """How long a ``stop`` fault holds its rank: well past the job's collective timeout, so that it is lost."""
    return 1.5 * timeout_s + 1


def continue_stopped(events: list[dict], stop_s: float, woken: set[int]) -> None:
    """The stop fault's other half: SIGCONT to each process that logged a ``stop`` fault (its ``pid``) at
    least ``stop_s`` ago, once (``woken`` holds the ones already sent)."""
    for e in events:
        if e["kind"] == "fault" and e.get("fault") == "stop" and e["pid"] not in woken:
            if time.time() - e["t"] >= stop_s:
                woken.add(e["pid"])
                try:
                    os.kill(e["pid"], signal.SIGCONT)
                except ProcessLookupError:
                    pass


KEPT = 0
"""The replica group the torchft strategy's Poisson schedule never strikes (see ``keeps_one``)."""


def keeps_one(faults: tuple[Fault, ...] | list[Fault], world: int) -> None:
    """Raise PlanError unless one rank is struck by no fault. torchft heals a replica from a live peer that holds
    the state: two kills (or a stop and a kill) of every replica in quick succession leave none, the steps
    committed since are lost and the run cannot equal its reference; a replica no fault strikes is always that
    peer (the Poisson schedule keeps ``KEPT``)."""
    struck = {f.rank for f in faults}
    if world >= 2 and len(struck) >= world:
        raise PlanError(
            f"torchft needs one replica group that no fault strikes (a live peer to heal from); this schedule "
            f"strikes all {world}"
        )
