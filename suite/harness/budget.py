"""The sample budget (BUDGET_S): how many samples and warm-up iterations a case takes, decided from the ones
it has so far (pure; suite/harness/timing.py applies it, rank 0 deciding for every rank)."""

from __future__ import annotations

from collections.abc import Sequence

BUDGET_MIN_SAMPLES = 10
"""A budget never cuts a case below this many samples (pytest-benchmark's statistics stay meaningful)."""


def budget_count(samples_s: Sequence[float], n: int, budget_s: float) -> int:
    """How many samples a case takes, from the (cross-rank max) samples it has so far: ``n`` when ``n`` of
    them fit in ``budget_s`` at their mean, else as many as fit, never fewer than ``BUDGET_MIN_SAMPLES``
    (nor than it already has, nor more than ``n``). ``budget_s`` 0: ``n``."""
    if budget_s <= 0 or not samples_s:
        return n
    mean = sum(samples_s) / len(samples_s)
    fit = n if mean <= 0 else int(budget_s / mean)
    return max(min(n, len(samples_s), BUDGET_MIN_SAMPLES), min(n, max(fit, BUDGET_MIN_SAMPLES)))


WARMUP_MIN = 2
"""A budget never cuts the warm-up below this many iterations (the first holds one-time set-up: lazy
allocation, connections, DDP's buckets; the second is the first of the steady ones)."""
WARMUP_SHARE = 0.1
"""Under a budget, the warm-up past ``WARMUP_MIN`` iterations takes at most this share of it."""


def warmup_count(first_s: Sequence[float], n: int, budget_s: float) -> int:
    """How many warm-up iterations a case runs, from rank 0's times of its first ones (the last of them, past
    the first's set-up, prices one): ``n`` when they fit in ``WARMUP_SHARE`` x ``budget_s``, else as many as
    fit, never fewer than it already ran. ``budget_s`` 0: ``n``."""
    if budget_s <= 0 or not first_s or first_s[-1] <= 0:
        return n
    return max(min(n, len(first_s)), min(n, int(WARMUP_SHARE * budget_s / first_s[-1])))
