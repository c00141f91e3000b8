"""Calibration: how many back-to-back calls of an op make one sample long enough to time (for an op too short
to time alone: a small-message round trip, a small matmul)."""

from __future__ import annotations

import math
import time

from suite.case import OpFn, wait_all
from suite.harness.dist import DistContext, dist_max
from suite.harness.timing import barrier


def autorange(
    ctx: DistContext,
    op: OpFn,
    *,
    min_sample_s: float,
    min_repeats: int = 1,
    max_repeats: int = 10_000,
    max_sample_s: float | None = None,
) -> tuple[int, float]:
    """How many back-to-back calls of ``op`` make one sample last at least ``min_sample_s``.

    For cases whose one op is too short to time alone (a small-message round trip): like
    ``timeit.Timer.autorange``, trials of n calls (a barrier before each trial, none between
    the calls) grow n until the slowest rank's trial lasts ``min_sample_s``, starting at
    ``min_repeats`` and never beyond ``max_repeats``. Each trial's time is agreed across ranks
    (MAX all_reduce), so every rank returns the same ``(n, trial seconds)``. One untimed call
    first (warm-up). Every rank must call it (a collective), with an ``op`` that is a no-op on
    ranks not involved.

    ``max_sample_s``: a trial longer than this (the slowest rank's) is not taken: n shrinks once to what
    that trial's rate says lasts ``min_sample_s`` (with the same headroom), and grows again from there if
    that is too short. For work whose rate drops with its length: a CPU quota (a container's cpus,
    granted per 100 ms period) lets a short trial run at full speed within one period's grant and
    throttles a long one, so the trial after a short one can last many times the target.
    """
    capped_below = max_sample_s is not None and not max_sample_s > min_sample_s
    if not (min_sample_s > 0) or not (1 <= min_repeats <= max_repeats) or capped_below:
        raise ValueError(
            f"autorange needs min_sample_s > 0, 1 <= min_repeats <= max_repeats and max_sample_s > min_sample_s, "
            f"got {min_sample_s}, {min_repeats}, {max_repeats}, {max_sample_s}"
        )
    wait_all(op(False))
    ctx.sync_device()
    n, shrunk = min_repeats, False
    while True:
        barrier(ctx)
        t0 = time.perf_counter()
        for _ in range(n):
            wait_all(op(False))
        ctx.sync_device()
        elapsed = dist_max(ctx, [time.perf_counter() - t0])[0]
        following = next_repeats(n, elapsed, min_sample_s, max_sample_s, min_repeats, max_repeats, shrunk=shrunk)
        if following is None:
            return n, elapsed
        shrunk = shrunk or following < n  # one shrink: trials must not go back and forth on a rate that varies
        n = following


CAPPED_GROWTH = 4
"""With ``max_sample_s``, n grows at most this many times a trial: the first trial a CPU quota throttles holds at
most 4 times the work of the last one it did not, so it lasts a few times the target, not hundreds of times."""


def next_repeats(
    n: int,
    elapsed: float,
    min_sample_s: float,
    max_sample_s: float | None,
    min_repeats: int,
    max_repeats: int,
    *,
    shrunk: bool = False,
) -> int | None:
    """The next trial's count after a trial of ``n`` calls that lasted ``elapsed`` (on the slowest rank), or
    None when that trial is the sample: long enough and, with ``max_sample_s``, not longer than it (or n shrank
    once already: ``shrunk``). A trial too short grows n (aiming at the target with 20% headroom, at least
    doubling; with ``max_sample_s`` at most ``CAPPED_GROWTH`` times); one too long shrinks it to the count its
    rate says lasts the target with the same headroom. Within [min_repeats, max_repeats]."""
    aim = math.ceil(n * min_sample_s / max(elapsed, 1e-9) * 1.2)
    if elapsed < min_sample_s:
        grown = max(2 * n, aim) if max_sample_s is None else min(CAPPED_GROWTH * n, max(2 * n, aim))
        return None if n >= max_repeats else min(max_repeats, grown)
    if max_sample_s is None or shrunk or elapsed <= max_sample_s or n <= min_repeats:
        return None
    return max(min_repeats, min(aim, n - 1))
