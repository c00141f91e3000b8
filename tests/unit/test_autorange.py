"""autorange, the calibration of how many calls make one sample: on a one-rank Gloo group in this process, and its
step from one trial to the next (``next_repeats``)."""

from __future__ import annotations

import time

import pytest

from suite.harness.autorange import autorange, next_repeats


def test_a_trial_too_short_grows_n_at_least_twofold_and_one_long_enough_is_the_sample():
    assert next_repeats(16, 0.004, 0.4, None, 16, 100_000) == 1920  # 16 x 0.4 / 0.004 x 1.2
    assert next_repeats(16, 0.3, 0.4, None, 16, 100_000) == 32  # at least doubling
    assert (
        next_repeats(99_000, 0.3, 0.4, None, 16, 100_000) == 100_000
        and next_repeats(100_000, 0.3, 0.4, None, 16, 100_000) is None
    )
    assert next_repeats(1920, 4.0, 0.4, None, 16, 100_000) is None  # no cap: any trial long enough is taken
    assert next_repeats(1920, 0.7, 0.4, 0.8, 16, 100_000) is None  # within the cap


def test_with_a_cap_n_grows_at_most_fourfold_a_trial():
    assert next_repeats(16, 0.004, 0.4, 0.8, 16, 100_000) == 64  # not 1920: that trial may be the throttled one
    assert next_repeats(16, 0.3, 0.4, 0.8, 16, 100_000) == 32  # still at least doubling


def test_a_trial_over_the_cap_shrinks_n_to_what_its_rate_says_lasts_the_target():
    assert next_repeats(1920, 4.0, 0.4, 0.8, 16, 100_000) == 231  # 1920 x 0.4 / 4.0 x 1.2, rounded up
    assert next_repeats(231, 4.0, 0.4, 0.8, 16, 100_000, shrunk=True) is None  # once: then any long enough trial
    assert next_repeats(20, 4.0, 0.4, 0.8, 16, 100_000) == 16  # never below min_repeats
    assert next_repeats(16, 4.0, 0.4, 0.8, 16, 100_000) is None  # at min_repeats: nothing shorter to try


def test_a_quota_that_throttles_only_long_trials_gives_a_sample_near_the_target_not_the_throttled_trial(ctx):
    # an op under a CPU quota: the first calls run within one period's grant (free), then each costs 2 ms of sleep
    calls = []

    def op(async_op):
        calls.append(1)
        if len(calls) > 20:
            time.sleep(0.002)

    n, trial_s = autorange(ctx, op, min_sample_s=0.05, min_repeats=4, max_repeats=500, max_sample_s=0.1)
    # 4 free calls, then 16 (one throttled), then 64 throttled (>= 128 ms: over the cap), shrunk to at most
    # ceil(64 x 0.05 / 0.128 x 1.2) = 30 (>= 60 ms: taken). Uncapped, the free first trial sized the second at 500
    # calls, a second of sleep, and that was the sample. A loaded machine stretches the sleeps: the 64 calls then
    # take longer and shrink to fewer (22 at 144 ms), which may fall short of 50 ms once more and double (44); the
    # rate never asks for more than 0.05 / 0.002 x 1.2 = 30, so n stays at most 2 x 30 under any load
    assert 4 < n <= 60 and trial_s >= 0.05
    assert len(calls) < 1 + 4 + 500  # the throttled 500-call trial never ran


def test_a_cap_not_above_the_target_is_refused(ctx):
    with pytest.raises(ValueError, match="max_sample_s > min_sample_s"):
        autorange(ctx, lambda a: None, min_sample_s=0.05, max_sample_s=0.05)
