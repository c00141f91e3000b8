"""Calibration: how many back-to-back calls of an op make one sample long enough to time (for an op too short
to time alone: a small-message round trip, a small matmul)."""

from __future__ import annotations

import math
import time

from suite.case import OpFn, wait_all
from suite.harness.dist import DistContext, dist_max
from suite.harness.timing import barrier


def autorange(
    ctx: DistContext, op: OpFn, *, min_sample_s: float, min_repeats: int = 1, max_repeats: int = 10_000
) -> tuple[int, float]:
    """How many back-to-back calls of ``op`` make one sample last at least ``min_sample_s``.

    For cases whose one op is too short to time alone (a small-message round trip): like
    ``timeit.Timer.autorange``, trials of n calls (a barrier before each trial, none between
    the calls) grow n until the slowest rank's trial lasts ``min_sample_s``, starting at
    ``min_repeats`` and never beyond ``max_repeats``. Each trial's time is agreed across ranks
    (MAX all_reduce), so every rank returns the same ``(n, trial seconds)``. One untimed call
    first (warm-up). Every rank must call it (a collective), with an ``op`` that is a no-op on
    ranks not involved.
    """
    if not (min_sample_s > 0) or not (1 <= min_repeats <= max_repeats):
        raise ValueError(
            f"autorange needs min_sample_s > 0 and 1 <= min_repeats <= max_repeats, got "
            f"{min_sample_s}, {min_repeats}, {max_repeats}"
        )
    wait_all(op(False))
    ctx.sync_device()
    n = min_repeats
    while True:
        barrier(ctx)
        t0 = time.perf_counter()
        for _ in range(n):
            wait_all(op(False))
        ctx.sync_device()
        elapsed = dist_max(ctx, [time.perf_counter() - t0])[0]
        if elapsed >= min_sample_s or n >= max_repeats:
            return n, elapsed
        # aim at the target with 20% headroom, at least doubling (the same on every rank: elapsed is agreed)
        n = min(max_repeats, max(2 * n, math.ceil(n * min_sample_s / max(elapsed, 1e-9) * 1.2)))
