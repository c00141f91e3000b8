"""The link probe's stop rule (suite/model/link_probe.py ``probe_stop``): levelled off, size cap, time bound, in
that order; and what its steps beyond the sweep are (suite/ops/p2p/link_probe.py)."""

from __future__ import annotations

import pytest

from suite.common.config import build_config
from suite.model.link_probe import LEVELLED_GAIN, PROBE_CAP_BYTES, RatePoint, probe_stop, step_gain
from suite.ops.p2p import link_probe

MiB = 1 << 20


def _pts(*rates, start=MiB, ci=None):
    return [RatePoint(start * 4**k, r, ci and (r * (1 - ci), r * (1 + ci))) for k, r in enumerate(rates)]


def test_a_step_that_gains_less_than_the_bound_has_levelled_off():
    assert probe_stop(_pts(1.0, 1.0 + LEVELLED_GAIN / 2))[0] == "levelled off"
    assert probe_stop(_pts(1.0, 0.9))[0] == "levelled off"  # a drop: no longer growing
    assert probe_stop(_pts(1.0, 1.0 + 2 * LEVELLED_GAIN)) is None  # still growing: go on


def test_the_words_give_the_gain_and_its_interval():
    why, words = probe_stop(_pts(2.0, 2.04, ci=0.01))
    assert why == "levelled off" and words.startswith("levelled off at 4 MiB (+2% over 1 MiB, interval [")
    gain, (lo, hi) = step_gain(*_pts(2.0, 2.04, ci=0.01))
    assert lo < gain < hi and gain == pytest.approx(0.02)
    assert step_gain(*_pts(2.0, 2.04))[1] is None  # no intervals: none for the gain


def test_the_cap_stops_a_rate_still_growing():
    why, words = probe_stop(_pts(1.0, 2.0, start=PROBE_CAP_BYTES // 4))
    assert why == "size cap" and "still growing (+100% over 16 MiB)" in words


def test_the_time_bound_counts_the_spent_time_and_the_next_steps_predicted_cost():
    pts = _pts(1.0, 2.0)
    assert probe_stop(pts, spent_s=1.0, next_s=0.9, time_s=2.0) is None
    why, words = probe_stop(pts, spent_s=1.0, next_s=1.1, time_s=2.0)
    assert why == "time bound" and "the step to 16 MiB would take about 1.10 s" in words


def test_levelled_off_comes_before_the_cap_and_the_time_bound():
    assert probe_stop(_pts(1.0, 1.01, start=PROBE_CAP_BYTES // 4), spent_s=9, next_s=9)[0] == "levelled off"


def test_one_point_has_no_step_to_judge():
    assert probe_stop(_pts(1.0)) is None and probe_stop([]) is None


def test_the_steps_beyond_the_sweep_go_by_four_to_the_cap():
    assert link_probe.sizes_beyond(1 * MiB) == [4 * MiB, 16 * MiB, 64 * MiB]
    assert link_probe.sizes_beyond(16 << 10)[0] == 64 << 10 and link_probe.sizes_beyond(64 * MiB) == []
    assert link_probe.probe_window(64 * MiB, 64) == 1 and link_probe.probe_window(4 * MiB, 64) == 4


def test_a_steps_predicted_cost_follows_the_sample_budget():
    cfg = build_config(iters="20", warmup_iters="5", budget_s="0.5")
    assert link_probe.step_cost_s(cfg, 0.001) == pytest.approx((20 + 5 + 2) * 0.001)
    assert link_probe.step_cost_s(cfg, 0.1) == pytest.approx((10 + 5 + 2) * 0.1)  # the budget's minimum samples


def _window_steps(rates_gbps: dict[int, float]):
    """A session that saw the sweep's unidirectional window at each size at the given rate (as the window's
    derive keeps it), and the probe's first step beyond 1 MiB with its resolve hook."""
    import dataclasses

    from suite.case import Session
    from suite.measurement import Measurement
    from suite.ops.p2p import window
    from suite.ops.p2p.pattern import Spec

    cfg = build_config(iters="20", warmup_iters="5", budget_s="0.5")
    session = Session(cfg)
    spec = Spec(pattern="window", variant="unidirectional", size_bytes=0, dtype="float32", src=0, dst=1, window=64)
    for size, gbps in rates_gbps.items():
        t = size / (gbps * 1e9)
        m = Measurement(
            samples_s=[t * (1 + 0.001 * k) for k in range(20)],
            timing_mode="blocking",
            ops_per_sample=1,
            warmup_iters=5,
            precision_reached=None,
        )
        s = dataclasses.replace(spec, size_bytes=size)
        assert link_probe.observe(None, s, m, session, max_bytes=None, window_max=window.WINDOW) == {}
    step = dataclasses.replace(spec, size_bytes=4 * MiB, window=16)
    return cfg, session, link_probe.resolver(step, 1 * MiB, window.WINDOW)


def test_the_first_step_runs_while_the_sweep_still_grows_and_is_skipped_once_it_levelled():
    from suite.case import StepNotTaken

    cfg, session, resolve = _window_steps({256 << 10: 1.0, 1 * MiB: 1.5})  # +50%: still growing
    assert resolve("the case", None, cfg, session) == "the case"
    cfg, session, resolve = _window_steps({256 << 10: 1.0, 1 * MiB: 1.02})  # +2%: levelled off within the sweep
    with pytest.raises(StepNotTaken, match=r"link probe stopped: levelled off at 1 MiB \(\+2% over 256 KiB"):
        resolve("the case", None, cfg, session)
    with pytest.raises(StepNotTaken, match="link probe stopped: levelled off"):  # and stays stopped
        resolve("the case", None, cfg, session)
    cfg, session, resolve = _window_steps({256 << 10: 1.0})  # the sweep's largest window did not complete
    with pytest.raises(StepNotTaken, match="no rate at 1 MiB"):
        resolve("the case", None, cfg, session)
