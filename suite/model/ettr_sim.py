"""The Monte-Carlo check of suite.model.ettr's closed forms: one job's timeline walked against a seeded Poisson
process of failures (pure Python, ``random.Random``; no torch, nothing measured).

The job alternates ``tau`` seconds of training and ``ckpt_s`` of checkpoint writing; a failure at any moment
(training, writing, or recovering) throws away the work since the last completed checkpoint, and the job
spends ``restart_s`` before it trains again (a failure during that time starts the recovery over). The
failures are drawn once, as absolute times on the wall clock (gaps exponential with mean ``mtbf_s``), and
the job's state machine is walked past them: the simulation shares no algebra with the formulas it checks.
Live recovery (no checkpoint rollback) is the same timeline with ``tau`` one step and ``ckpt_s`` the
per-step overhead: the step in flight is what a failure loses.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Simulated:
    """What one simulated run ended with."""

    ettr: float
    """Productive training time over wall time."""
    wall_s: float
    """The run's wall time (s), until ``work_s`` of training was kept."""
    failures: int
    """Failures that struck the run."""
    redone_s: float
    """Training time thrown away and done again (s)."""


class _Failures:
    """Absolute failure times on the wall clock, drawn lazily from one seeded stream."""

    def __init__(self, mtbf_s: float, seed: int):
        self._rng = random.Random(seed)
        self._mtbf_s = mtbf_s
        self.next_s = self._rng.expovariate(1.0 / mtbf_s)

    def advance(self) -> float:
        """The failure after the current one; returns the current one's time."""
        now = self.next_s
        self.next_s += self._rng.expovariate(1.0 / self._mtbf_s)
        return now


def simulate(*, tau_s: float, ckpt_s: float, restart_s: float, mtbf_s: float, work_s: float, seed: int) -> Simulated:
    """Walk a job that must keep ``work_s`` of training through Poisson failures of mean gap ``mtbf_s``."""
    if min(tau_s, mtbf_s, work_s) <= 0 or min(ckpt_s, restart_s) < 0:
        raise ValueError("tau_s, mtbf_s and work_s must be positive, ckpt_s and restart_s not negative")
    fail = _Failures(mtbf_s, seed)
    now = kept = redone = 0.0
    failures = 0
    while kept < work_s - 1e-9:
        train = min(tau_s, work_s - kept)
        # the last segment ends the run: its checkpoint is not needed
        segment = train + (ckpt_s if kept + train < work_s - 1e-9 else 0.0)
        if fail.next_s >= now + segment:
            now += segment
            kept += train
            continue
        struck = fail.advance()
        failures += 1
        redone += min(struck - now, train)
        now = struck
        while fail.next_s < now + restart_s:  # struck again while recovering: recovery starts over
            now = fail.advance()
            failures += 1
        now += restart_s
    return Simulated(ettr=kept / now, wall_s=now, failures=failures, redone_s=redone)
