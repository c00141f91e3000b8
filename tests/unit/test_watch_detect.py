"""The watch's change-point detector (suite/watch/detect.py) on seeded synthetic series: a clean series flags
nothing, a rank, a node and a link that turn slower than their past and their peers are named with their onset,
a slowdown every rank shares is not, and the rank-sum test's p-value is what the formula gives."""

from __future__ import annotations

import dataclasses
import math
import random
import re

import pytest

from suite.watch import detect, pauses, watch


def _series(seed: int, ranks: int, steps: int, slow: dict[int, float], since: int, noise: float = 0.05):
    """Per step, rank -> seconds: 10 ms with log-normal noise; the ranks in ``slow`` that many times slower from
    step ``since``."""
    rng = random.Random(seed)
    out = []
    for t in range(steps):
        out.append(
            {
                f"rank {r}": 0.01 * rng.lognormvariate(0, noise) * (slow.get(r, 1.0) if t >= since else 1.0)
                for r in range(ranks)
            }
        )
    return out


def _run(series, ranks: int) -> list[detect.Flag]:
    d = detect.Detector("compute", "rank", {f"rank {r}": (r,) for r in range(ranks)})
    return [f for step in series for f in d.add(step)]


@pytest.mark.parametrize("seed", range(20))
def test_a_clean_series_flags_nothing(seed):
    assert _run(_series(seed, 4, 200, {}, 0, noise=0.15), 4) == []


@pytest.mark.parametrize("seed", range(10))
def test_a_rank_twice_as_slow_is_named_with_its_onset(seed):
    (flag,) = _run(_series(seed, 4, 80, {2: 2.0}, 40), 4)
    assert (flag.kind, flag.target, flag.ranks, flag.metric) == ("rank", "rank 2", (2,), "compute")
    assert flag.onset == 40 and 40 + detect.MIN_AFTER - 1 <= flag.detected <= 40 + detect.MIN_AFTER + 9
    assert 1.8 < flag.ratio < 2.2 and 1.8 < flag.own_ratio < 2.2 and flag.p < detect.ALPHA


@pytest.mark.parametrize("seed", range(10))
def test_a_rank_20_percent_slower_is_named_after_its_onset(seed):
    (flag,) = _run(_series(seed, 2, 120, {1: 1.2}, 60, noise=0.02), 2)
    assert flag.target == "rank 1" and 58 <= flag.onset <= 62 and flag.detected < 90


@pytest.mark.parametrize("seed", range(5))
def test_a_slowdown_every_rank_shares_is_not_named(seed):
    assert _run(_series(seed, 4, 100, {r: 2.0 for r in range(4)}, 50), 4) == []


@pytest.mark.parametrize("seed", range(5))
def test_a_5_percent_slowdown_is_below_what_is_named(seed):
    assert _run(_series(seed, 2, 150, {1: 1.05}, 50, noise=0.01), 2) == []


def _loaded(seed: int, steps: int, shape, noise: float = 0.05):
    """2 ranks on a loaded host: per step ``shape(t)`` gives the load every rank shares and rank 0's share of
    it against rank 1 (``(1.3, 1.04)``: both 1.3x slower, rank 0 4% more)."""
    rng = random.Random(seed)
    out = []
    for t in range(steps):
        load, r0 = shape(t)
        out.append(
            {
                "rank 0": 0.01 * load * r0 * rng.lognormvariate(0, noise),
                "rank 1": 0.01 * load * rng.lognormvariate(0, noise),
            }
        )
    return out


def _moved(t: int) -> tuple[float, float]:
    """The load moves: rank 0 at 0.92x its peer, then, from step 60, everyone 1.3x slower and rank 0 at 1.04x."""
    return (1.0, 0.92) if t < 60 else (1.3, 1.04)


def _stretches(t: int) -> tuple[float, float]:
    """The load comes and goes: every 50 steps everyone 1.3x slower or not; every 40, rank 0 1.15x for 8 steps."""
    return 1.0 + 0.3 * ((t // 50) % 2), 1.15 if t % 40 >= 32 else 1.0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shape", [_moved, _stretches])
def test_a_loaded_but_clean_rank_is_not_named(seed, shape):
    assert _run(_loaded(seed, 200, shape), 2) == []


@pytest.mark.parametrize("seed", range(6))
def test_a_rank_slowed_on_a_loaded_host_is_still_named(seed):
    series = _loaded(seed, 200, lambda t: (_stretches(t)[0], 1.5 if t >= 100 else _moved(t)[1]))
    (flag,) = _run(series, 2)
    # the onset within a few steps: the CUSUM may have just started over (the load had moved, a level under the floor)
    assert flag.target == "rank 0" and 98 <= flag.onset <= 106 and flag.detected < 100 + 2 * detect.MIN_AFTER


def test_a_rank_is_named_only_above_its_past_slowest_stretch_and_its_peers_now():
    calm, slow_past = [0.0] * 40, [0.0] * 20 + [0.15] * 12 + [0.0] * 8
    assert detect.slower_than_drift(calm, [0.12] * 12)
    assert not detect.slower_than_drift(calm, [0.08] * 12)  # under the floor of 1.1x its peers now
    assert not detect.slower_than_drift(slow_past, [0.2] * 12)  # its past held 1.16x: 1.22x is not 1.1x above
    assert detect.slower_than_drift(slow_past, [0.3] * 12)
    assert not detect.slower_than_drift(calm, [0.3] * 6 + [0.0] * 6)  # ended halfway


def test_a_burst_of_three_slow_steps_is_not_a_change():
    series = _series(0, 4, 120, {}, 0)
    for t in (50, 51, 52):
        series[t]["rank 3"] *= 3
    assert _run(series, 4) == []


def test_every_rank_of_a_node_makes_one_flag_of_the_node():
    flags = _run(_series(1, 6, 80, {2: 1.9, 3: 1.9}, 41), 6)
    assert sorted(f.target for f in flags) == ["rank 2", "rank 3"]
    (node,) = detect.merge_nodes(flags, {"node0": (0, 1), "node1": (2, 3), "node2": (4, 5)})
    assert (node.kind, node.target, node.ranks, node.onset) == ("node", "node1", (2, 3), 41)
    said = r"# slow: node1 \(ranks 2, 3\) compute 1\.[789]x since step 41 \(detected 6\.2 s after onset, p < 0\.001\)"
    assert re.fullmatch(said, detect.line(node, 6.2))


def test_one_rank_of_a_node_stays_a_rank_and_one_node_is_no_node():
    flags = _run(_series(2, 4, 90, {1: 2.0}, 40), 4)
    assert [f.target for f in detect.merge_nodes(flags, {"node0": (0, 1), "node1": (2, 3)})] == ["rank 1"]
    both = _run(_series(2, 4, 90, {0: 2.0, 1: 2.0}, 40), 4)
    assert {f.kind for f in detect.merge_nodes(both, {"node0": (0, 1, 2, 3)})} == {"rank"}


def test_a_link_is_named_among_links():
    series = [{k.replace("rank ", "link 0->"): v for k, v in s.items()} for s in _series(3, 3, 80, {1: 3.0}, 40)]
    d = detect.Detector("transfer", "link", {f"link 0->{r}": (0, r) for r in range(3)})
    (flag,) = [f for s in series for f in d.add(s)]
    assert (flag.target, flag.ranks, flag.onset) == ("link 0->1", (0, 1), 40)
    assert detect.line(flag, None) == f"# slow: link 0->1 transfer {flag.ratio:z.1f}x since step 40 (p < 0.001)"


@pytest.mark.parametrize("seed", range(5))
def test_a_slowdown_from_the_first_steps_has_too_short_a_past_to_be_named(seed):
    """A rank twice as slow from step 24, past the warm-up but before MIN_BEFORE steps, is not named (a loaded host's
    first stretch of one rank sharing its core looks the same); from step MIN_BEFORE on, it is."""
    assert _run(_series(seed, 2, 120, {1: 2.0}, 24), 2) == []
    (flag,) = _run(_series(seed, 2, 120, {1: 2.0}, detect.MIN_BEFORE), 2)
    assert (flag.target, flag.onset) == ("rank 1", detect.MIN_BEFORE)


def test_rank_sum_p_values():
    # U = 9 of 9 (after all above before), n1 = n2 = 3: z = (9 - 4.5 - 0.5) / sqrt(3*3*7/12) = 1.7457
    assert detect.rank_sum_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.04043, abs=1e-4)
    assert detect.rank_sum_p([4, 5, 6], [1, 2, 3]) > 0.9
    assert detect.rank_sum_p([1, 1, 1], [1, 1, 1]) == 1.0  # all tied: no variance, no evidence
    assert detect.rank_sum_p([], [1.0]) == 1.0


def test_the_steps_between_exchanges_keep_their_cost_at_its_share_of_the_step():
    from suite.watch import watch

    # 5.9 ms an exchange, 16 ms a step: 74 steps (73.75) keep it at 0.5%; bounded on both sides
    assert watch.next_every(0.0059, 0.016) == 74
    assert watch.next_every(1e-6, 0.016) == watch.EVERY
    assert watch.next_every(1.0, 0.001) == watch.EVERY_MAX == watch.next_every(0.001, 0.0)
    # an exchange held 1 s (a rank paused as it reached it), steps of 85 ms: the next within 2 s of steps
    assert watch.next_every(1.0, 0.085) == 24 == math.ceil(watch.GAP_S / 0.085)
    assert watch.next_every(1.0, 0.5) == watch.EVERY


@pytest.mark.parametrize("step_s", [0.0013, 0.006, 0.02, 0.028, 0.3, 2.0])
@pytest.mark.parametrize("cost_s", [0.0, 0.00023, 0.0009, 0.0014])
def test_the_checks_keep_their_measured_cost_at_their_share_of_the_step(step_s, cost_s):
    """A check's cost, measured as the run goes, spaces the checks: its share of the steps at most ``CHECK_PCT``
    (for a check of 1.4 ms or less on the mean), never closer than ``CHECK_S`` of steps nor ``CHECK`` steps, and no
    farther than either bound asks."""
    k = watch.check_every(step_s, cost_s)
    assert cost_s / k <= watch.CHECK_PCT / 100 * step_s * (1 + 1e-9)
    assert k * step_s >= watch.CHECK_S * (1 - 1e-9) and k >= watch.CHECK
    assert k == watch.CHECK or (k - 1) * step_s < watch.CHECK_S or cost_s / (k - 1) > watch.CHECK_PCT / 100 * step_s


def test_a_check_held_up_once_does_not_space_the_checks_by_seconds():
    """A first check that waited 15 ms for a peer, beside steps of 28 ms, asked for a check per 179 steps (5 s): a
    slowdown's first exchange would wait two such stretches at the slowed speed. At most ``CHECK_MAX_S`` of steps."""
    assert watch.check_every(0.028, 0.015) == 17 == math.floor(watch.CHECK_MAX_S / 0.028)
    assert watch.check_every(0.3, 0.015) == watch.CHECK  # slow steps: never fewer than CHECK


def test_checks_that_cost_900_us_beside_28_ms_steps_come_every_11_steps_not_every_5():
    """On a loaded 2-core machine a check (the call, and now and then a wait of milliseconds) cost 900 µs on the
    mean beside steps of 28 ms: at 0.1 s of steps, 5 steps apart, checks alone were 0.64% of the steps."""
    assert watch.check_every(0.028) == watch.CHECK == 5
    assert watch.check_every(0.028, 0.0009) == 11  # 10.7: 0.29% of the steps
    assert watch.check_every(0.0013, 0.0002) == 77 == watch.check_every(0.0013)  # a cheap check: 0.1 s decides


def test_the_watch_measures_its_checks_and_spaces_them_by_what_they_cost(ctx, monkeypatch):
    """One rank on a real Gloo group, its clock moved by the test only: steps of 20 ms, a check's all_reduce
    costing 1 ms. The first exchange sets the checks' spacing from the checks measured before it (the cadence's
    5 steps: 1 check), and the record states the checks' cost per step and its share."""
    import torch.nn as nn

    now = [100.0]
    monkeypatch.setattr(watch.time, "perf_counter", lambda: now[0])
    module = nn.Linear(2, 1)
    w = watch.Watch(ctx, None, module)

    def reduce(x):
        now[0] += 0.001
        return lambda: x

    monkeypatch.setattr(w, "_reduce", reduce)
    step = w.wrap(lambda: now.__setitem__(0, now[0] + 0.02))
    for _ in range(watch.EVERY + 30):
        step()
        w.before_sample()
    assert w.checks >= 1 and w.mine[1] == pytest.approx(0.001)
    assert w.cadence.check == watch.check_every(0.02, 0.001) == 17
    rec = w.finish()
    assert rec["watch_check_us"] == pytest.approx(1000.0) and rec["watch_check_every"] == 17
    assert rec["watch_check_us_per_step"] == pytest.approx(1000.0 * w.checks / (watch.EVERY + 30), rel=1e-3)
    assert rec["watch_cost_pct"] == pytest.approx(100 * rec["watch_cost_us_per_step"] / 20000.0, rel=1e-3)


def test_a_node_whose_ranks_are_flagged_at_different_points_is_named_once_when_the_last_is():
    flags = _run(_series(1, 6, 80, {2: 1.9, 3: 1.9}, 41), 6)
    early = [dataclasses.replace(f, detected=f.detected - 5) if f.target == "rank 2" else f for f in flags]
    nodes = detect.Nodes({"node0": (0, 1), "node1": (2, 3), "node2": (4, 5)})
    r2, r3 = sorted(early, key=lambda f: f.target)
    assert nodes.add([r2]) == [r2]  # its node-mate not yet: a rank
    (node,) = nodes.add([r3])
    assert (node.target, node.ranks, node.onset, node.detected) == ("node1", (2, 3), 41, r3.detected)
    r0 = dataclasses.replace(r2, target="rank 0", ranks=(0,))
    assert nodes.add([r0]) == [r0]  # node0's other rank is not flagged: a rank


def _pauses(series, ranks: int) -> list[detect.Flag]:
    d = pauses.Pauses("compute", "rank", {f"rank {r}": (r,) for r in range(ranks)})
    return [f for step in series for f in d.add(step)]


def _paused(seed: int, every: int, since: int, pause_s: float = 0.06, steps: int = 260):
    """A clean series of 2 ranks (10 ms, noise 0.15) where rank 1 is held ``pause_s`` more every ``every`` steps
    from ``since``: one step in ``every``, +``pause_s`` / ``every`` on the mean step."""
    series = _series(seed, 2, steps, {}, 0, noise=0.15)
    for t in range(since, steps, every):
        series[t]["rank 1"] += pause_s
    return series


@pytest.mark.parametrize("seed", range(10))
def test_a_rank_paused_every_15_steps_is_named_by_its_pauses_not_by_the_medians(seed):
    series = _paused(seed, 15, 100)
    assert _run(series, 2) == []  # the medians do not move: why the watch has a second detector
    (flag,) = _pauses(series, 2)
    assert (flag.target, flag.test, flag.onset, flag.events) == ("rank 1", "pauses", 100, pauses.EVENTS)
    assert flag.detected == 100 + 15 * (pauses.EVENTS - 1) and flag.ratio > 1.2


@pytest.mark.parametrize("seed", range(20))
def test_a_clean_series_with_stalls_of_the_host_flags_no_pauses(seed):
    """Noise, a few lone stalls of either rank, and one long stall (ten points in a row: one event)."""
    series = _series(seed, 2, 400, {}, 0, noise=0.15)
    rng = random.Random(seed)
    for t in rng.sample(range(70, 400), 3):
        series[t][f"rank {rng.randrange(2)}"] += 0.05
    for t in range(200, 210):
        series[t]["rank 1"] += 0.05
    assert _pauses(series, 2) == []


def test_pauses_too_small_to_slow_the_mean_step_by_10_percent_are_not_named():
    # held 50 ms every 60 steps of 10 ms: 8% on the mean
    assert _pauses(_paused(0, 60, 100, pause_s=0.05, steps=800), 2) == []


def test_pauses_from_the_first_steps_have_no_past_to_compare_with():
    assert _pauses(_paused(0, 15, 0), 2) == []


def test_a_ranks_own_time_holds_its_compute_and_how_much_later_than_its_peers_its_step_ended():
    # 2 ranks, compute 10 ms, steps of 20 ms: as they are; rank 1 stopped 0.4 s in its compute (every step waits at
    # the all-reduce); in its optimizer step (its step alone ends later); in a wait (every step alike)
    assert pauses.held([0.01, 0.01], [0.02, 0.02]) == [0.01, 0.01]
    assert pauses.held([0.01, 0.41], [0.42, 0.42]) == [0.01, 0.41]
    assert pauses.held([0.01, 0.01], [0.02, 0.42]) == pytest.approx([0.01, 0.41])
    assert pauses.held([0.01, 0.01], [0.42, 0.42]) == [0.01, 0.01]
    assert pauses.held([0.01, 0.01, 0.02], [0.02, 0.42, 0.03]) == pytest.approx([0.01, 0.405, 0.02])


def test_pauses_half_in_the_compute_half_after_the_all_reduce_are_named_by_the_ranks_own_time():
    """Rank 1 stopped 60 ms every 25 steps of 20 ms (compute 10 ms), in turn in its compute and in its optimizer
    step: in its compute alone they come every 50 steps, 4 of them not within ``WINDOW`` points."""
    rng = random.Random(0)
    computes, steps = [], []
    for t in range(400):
        c = [0.01 * rng.lognormvariate(0, 0.15) for _ in range(2)]
        s = [0.02 * rng.lognormvariate(0, 0.05)] * 2
        if t >= 100 and t % 25 == 0:
            if t % 50 == 0:
                c[1] += 0.06
                s = [x + 0.06 for x in s]
            else:
                s = [s[0], s[1] + 0.06]
        computes.append(c)
        steps.append(s)
    as_points = lambda rows: [{f"rank {k}": v for k, v in enumerate(r)} for r in rows]  # noqa: E731
    assert _pauses(as_points(computes), 2) == []  # the compute alone: why the ranks' own time
    (flag,) = _pauses(as_points(pauses.held(c, s) for c, s in zip(computes, steps)), 2)
    assert (flag.target, flag.onset, flag.detected) == ("rank 1", 100, 100 + 25 * (pauses.EVENTS - 1))


def test_the_points_follow_the_steps_where_they_get_many_times_longer_or_shorter():
    assert watch.block(0.02) == 3 and watch.block(0.2) == 1  # as many steps as make 50 ms
    assert watch.block(0.03, 3) == 3  # 2 asked for: a load's moves keep the block
    assert watch.block(0.4, 3) == 1  # a rank cut to 0.05 CPU: 20x the steps, a point per step
    assert watch.block(0.02, 1) == 3  # and back


def test_the_watch_s_last_exchange_comes_before_the_case_s_own_derived_fields(monkeypatch):
    """A DDP case's derive runs its baseline steps (a minute under load): the flags of the steps since the last
    exchange are raised before them, not after."""
    from types import SimpleNamespace

    from suite.watch import watch

    order = []

    class _Watch:  # the watch's collectives aside: what attach wires, and in which order
        def __init__(self, *args):
            pass

        def wrap(self, call):
            return call

        def before_sample(self):
            pass

        def finish(self):
            order.append("watch")
            return {"slowdowns": []}

    monkeypatch.setattr(watch, "Watch", _Watch)
    b = SimpleNamespace(call=None, before_sample=None, derive=lambda m, a, s: order.append("case") or {"x": 1})
    watch.attach(b, None, None, None)
    assert b.derive(None, None, None) == {"x": 1, "slowdowns": []} and order == ["watch", "case"]


def test_a_ranks_compute_starts_at_its_forward_not_at_the_wait_before_it(ctx, monkeypatch):
    """DDP broadcasts its buffers before it calls the module's forward: a rank waiting there for a slow peer would
    look as slow as it. The watch's compute runs from the module's first forward (a pre-hook) to its last gradient;
    the step from its call to its end. A clock that moves only where the test says (no sleeps)."""
    import torch
    import torch.nn as nn

    from suite.watch import watch

    now = [100.0]
    monkeypatch.setattr(watch.time, "perf_counter", lambda: now[0])
    module = nn.Linear(4, 1)
    w = watch.Watch(ctx, None, module)

    def step():
        now[0] += 5.0  # the wait before the forward (DDP's buffer broadcast)
        loss = module(torch.ones(2, 4)).sum()
        now[0] += 1.0  # this rank's own forward and backward
        loss.backward()
        now[0] += 0.5  # the last all-reduce's wait

    w.wrap(step)()
    ((start, compute, took, *_),) = w.rows
    assert (start, compute, took) == (100.0, 1.0, 6.5)
    for h in w.hooks:
        h.remove()


def _recorded(r0: str, r1: str) -> list[dict[str, float]]:
    """2 ranks' points as the watch fed them (ms, rounded to 1 or 0.1 ms)."""
    return [{"rank 0": float(a) / 1e3, "rank 1": float(b) / 1e3} for a, b in zip(r0.split(), r1.split(), strict=True)]


CLEAN_LOADED = _recorded(
    "10 6 7 16 11 17 16 7 7 24 23 7 7 7 7 18 7 7 24 8 7 16 7 7 14 13 9 7 16 8 22 21 32 9 12 40 34 32 30 20 19 16 18 16 "
    "17 19 26 8 7 9 15 16 11 11 15 17 14 12 13 10",
    "8 16 7 22 16 15 8 26 18 32 17 14 20 11 32 18 15 34 24 17 30 7 8 13 12 13 17 36 23 24 14 26 36 25 14 35 26 12 23 "
    "24 15 7 7 7 7 8 7 7 14 7 7 7 11 9 7 7 7 10 16 6",
)
"""The first 60 points of a fail-slow bench trial's watch before its injection's onset, on this 2-core machine at a
load of 4 to 8: both ranks between a 7 ms floor of compute and 20 to 40 ms as the load comes and goes; from point 35
rank 0 at 16 to 40 ms while rank 1 sits at its floor, 1.9x its peer against 0.5x before (a rank-sum p of 2.7e-6):
the detector without its absolute floor named rank 0 at point 53."""

CLEAN_LOADED_2 = _recorded(
    "6.3 6.4 6.2 5.9 6.1 6.8 8.1 9.2 7.1 7 6.9 6.6 6.4 6.5 6.3 6.5 9 6.9 5.8 7.1 6.5 8.6 7.6 7.5 7.5 9.1 7.4 6.5 "
    "7.4 5.9 6 8.3 7.9 6.6 6.1 6 6.5 7.5 6.6 9.4 6 10.4 6.8 6.1 6.1 6.1 5.7 6.6 5.9 5.9 5.8 8.9 6 6 6.2 14.2 11.4 "
    "6.1 6.8 5.9 5.7 6.1 6.3 5.9 9.5 6.4 6.5 5.8 6 6.1 5.7 6.1 12.1 13.1 5.9 5.7 6 6.7 6.5 9.5 5.9 6.6 6 8.2 5.8 "
    "5.7 6.3 30.7 5.9 6.1 5.9 9.5 9.7 6 5.7 17 9.4 13 14.1 10.1 8.2 14.2 11.3 5.7 7.6 14.3 9 6 6 6 8.7 13.9 9.9 "
    "8.5 5.9 16.5 13.4 10.5 8.9 13.8 10.5 6.8 5.9 6.4 6.2 6.2 6.1 12.6 7.6 6.2 9.4 8.5 9.5 13.8 8.7 10.7 12.7 "
    "10.6 7.7 9.5",
    "6.8 6.5 9.1 10 6.8 6.4 6.5 6.9 6.1 6.3 7 6.7 8.2 6 7.7 6.9 6.4 6.5 7.3 7.2 6.8 5.8 6.5 7 6.3 6 6.7 6.4 6.4 "
    "7.6 6.5 6.7 6.4 6.5 7.7 8.4 6.2 7.4 6.7 6.9 7.2 13.1 6.8 7.3 6.6 6 6.9 6.5 8.4 6.5 6.4 5.7 6.5 6.5 14.6 7.9 "
    "5.8 6.3 7.3 7.5 6 6.5 6.5 10.6 6 5.7 5.9 6.2 6.3 8.2 6.5 9.5 11.6 6.4 6 5.9 6.7 6.6 6.2 10 9.4 6.4 7.7 6.4 "
    "5.9 6.2 6.3 5.9 6.5 6 6.1 6 5.9 6.3 6.3 5.9 6.2 5.7 6 5.8 5.8 5.8 5.8 6.7 5.8 6 5.9 6.6 6.3 6.5 5.9 5.8 6.1 "
    "6 7.8 5.8 6 10.2 6 9.8 5.8 5.8 6.1 6.4 6.2 6.9 9.2 9.3 6.1 8.8 5.9 6 5.8 5.6 5.8 6.4 12.2 6 5.8 6",
)
"""The first 140 points of another clean bench trial on this machine, at a load of about 5 (0.1 ms): from point 95
rank 0 at 9 to 17 ms now and then while rank 1 sits at its 6 ms floor, 2.9 ms above it on the median against a
jitter of 2.2 ms before, 1.5x; named at point 138 at a level of 3e-6 (its p 2.2e-6)."""

SLOWED_LOADED = _recorded(
    "10 19 23 22 28 7 7 17 19 25 7 8 27 26 23 18 52 15 12 26 13 29 27 25 26 27 16 30 44 10 16 8 8 7 7 8 25 33 23 28 12 "
    "9 25 46 30 37 7 24 13 22 30 25 22 38 43 41 33 34 34 31 15 29 17 46 35 26 11 9 29 26 17 20 28 21 7 27 7 13 15 26 "
    "33 8 29 22 17 22 7 13 16 19 9 9 8 15 16 16",
    "6 7 7 21 19 25 24 19 22 15 22 27 16 19 25 7 15 7 12 20 14 15 15 28 15 15 23 22 23 8 11 30 34 26 40 27 31 15 16 18 "
    "14 34 27 7 15 34 45 15 22 19 12 32 35 41 39 35 27 36 49 14 18 11 14 31 57 41 36 28 35 53 43 11 23 104 101 147 "
    "100 303 104 348 302 152 303 54 53 100 255 54 150 54 54 103 53 53 54 98",
)
"""The first 96 points of the same bench's trial ``slow:1:5:10:20`` on the same machine: from point 73 rank 1 runs
5 ms of every 50 ms, its compute 50 to 350 ms."""


SLOWED_2_7 = _recorded(
    "12 10 10 6 7 30 50 12 13 13 6 10 16 25 8 21 25 8 24 31 34 17 9 15 16 13 36 28 7 7 6 13 6 6 10 28 12 11 8 6 16 12 "
    "6 6 11 8 8 13 25 26 42 25 23 22 41 52 33 23 29 67 24 7 23 52 51 81 95 58 23 23 45 56 75 6 41 54 25 26 7 45",
    "7 10 10 29 27 13 6 13 12 10 6 10 6 14 16 14 35 42 22 19 41 9 9 24 28 6 6 6 7 9 43 13 17 18 42 8 9 8 8 6 11 8 10 "
    "16 10 8 9 9 8 7 7 9 10 19 6 6 18 19 16 20 33 13 22 7 8 7 6 7 7 7 6 13 6 12 15 7 13 22 11 12",
)
"""The first 80 points of the same bench's trial ``slow:0:5:2.7:20`` at a load of about 10 (the step 1.76x slower):
from point 47 rank 0 runs 18.5 ms of every 50 ms, its compute 22 to 95 ms beside its peer's 6 to 33 ms."""


CLEAN_MOVED = _recorded(
    "6.2 7.4 6.9 6.4 19.6 6.6 34.3 26.1 24.5 7.4 37.7 6.4 6.5 6.4 6.4 9.1 16.8 36 42 26.6 6.4 23.3 29.4 6.6 7.2 6.7 "
    "15.1 10 34 35.4 8.7 24.2 26.7 12.4 6.5 31.2 8.8 13.7 12.5 11.2 10.2 9.5 25 39 26.1 6 12.6 24.9 24.7 39.2 53.9 "
    "34.4 7.5 7 6.7 10.4 6.6 7 12.4 35.3 35.6 27 24.3 27.1 49.1 21.8 7.4 7.2 6.5 7.9 6.3 54.5 49.1 12.6 47.9 36.3 "
    "6.7 25.5 60.1 33.3 33 29.5 33.5 41.8 34.9 48.2 17.7 34.2 62.8 43.4 37.6 43.7 50.8 48.1 38.5 54 55 50.7 49 33.2 "
    "43.7 49.3 42.9 36 44.6 42.6 40.9 43.4 39.4 20.4 6.6 6.5 39.7 9.3 7.4 44.7 27.8 36.2 47.6 7.2",
    "18.4 30.8 30.7 30.4 16.9 26.8 20.1 32.2 28.7 33.6 26.9 25.4 33.5 24.5 25.4 35.9 21.5 6.8 33.2 33.6 30.5 46.1 "
    "44.8 36.6 28.4 39.4 8.9 30 49.5 32.2 26.5 25.6 27.7 32.2 47.8 13.7 27.6 15.6 19.8 14.4 15.5 20 29.5 46.4 6.3 "
    "6.8 35.8 36.4 32.9 41 37 45 44.1 36.5 51.8 38.8 43.2 35.9 41.9 22.8 6.4 35.5 46.1 32.2 49.6 37.6 20.6 39.9 "
    "19.5 40.2 25.2 47.9 53.1 10.5 33.7 49.1 32.2 29.5 6.7 6.6 6.5 6.6 7.1 7.6 7.2 6.8 8.8 6.5 8.4 6.5 29.5 7 52.1 "
    "46.9 29.1 6.9 6.6 6.7 45.1 56.4 61.8 6.4 6.6 6.4 8.5 44.4 6.5 39.6 33.6 7 24.6 38 6.7 32.1 35.6 45.3 37.2 43 "
    "42.9 43.9",
)
"""The first 120 points of a clean bench trial's watch (``make failslow-bench TRIALS=4 FAILSLOW_CYCLE=1
FAILSLOW_CLASSES=none FAILSLOW_BUDGET_S=14 FAILSLOW_ITERS=700`` at a load of 11 to 12, kept in its record's
``watch_series``): rank 1 at 20 to 50 ms beside rank 0 wandering 6 to 40 ms, then from point 78 the load moves:
rank 1 at its 6.5 ms floor (now and then loaded too), rank 0 at 18 to 63 ms for 32 points (2 s), 7.7x its peer
against 0.5x before, 28 ms above it, p 8.9e-8 at point 89, where it was named before ``OWN_QUANTILE``; with the
past's 90th percentile as the floor, at point 95 (its median since the onset had reached 42 ms). Rank 0's times
before had reached 49 ms 1 time in 20: no slower than it had been, the load on its core."""


def test_a_rank_the_load_moved_onto_is_not_slower_than_its_own_past_spread():
    assert _run(CLEAN_MOVED, 2) == []
    assert detect.above_own_spread([0.01] * 39 + [0.04], [0.02] * 12)  # above the past's 95th percentile (10 ms)
    assert not detect.above_own_spread([0.01] * 38 + [0.04] * 2, [0.02] * 12)  # under it (40 ms)


def test_a_rank_twice_as_slow_on_a_noisy_host_is_named_as_soon_as_without_the_own_spread(monkeypatch):
    """Points with 30% log-normal noise, rank 1 twice as slow from point 100: named from the same onset in the same
    8 of 10 seeds with the floor as with none (the past's least time, which every median passes), at the same point
    in 7 of them (in the eighth 25 points later: its past had reached 2x its median 1 time in 20)."""
    series = [_series(seed, 2, 160, {1: 2.0}, 100, noise=0.3) for seed in range(10)]
    flags = [_run(s, 2) for s in series]
    monkeypatch.setattr(detect, "OWN_QUANTILE", 0.0)
    before = [_run(s, 2) for s in series]
    assert [[(f.target, f.onset) for f in fs] for fs in flags] == [[(f.target, f.onset) for f in fs] for fs in before]
    assert sum(len(fs) == 1 for fs in flags) == 8
    assert (
        sum(bool(fs) and fs == b and fs[0].detected < 100 + 2 * detect.MIN_AFTER for fs, b in zip(flags, before)) == 7
    )


def test_a_loaded_hosts_millisecond_stretch_is_not_named_and_slowed_ranks_on_it_are():
    assert _run(CLEAN_LOADED, 2) == [] == _run(CLEAN_LOADED_2, 2)
    (flag,) = _run(SLOWED_LOADED, 2)
    assert flag.target == "rank 1" and 73 <= flag.onset <= 78
    (flag,) = _run(SLOWED_2_7, 2)  # at point 75 from point 48 (72 from 47 without detect.OWN_QUANTILE)
    assert flag.target == "rank 0" and 47 <= flag.onset <= 48


def _jittery(seed: int, steps: int = 200, stretch: range = range(0), slow_from: int | None = None):
    """2 ranks at an 8 ms floor of compute, each point of each rank 9 to 40 ms instead at a chance of 1/2 (a loaded
    host's load coming and going, as CLEAN_LOADED shows); through ``stretch`` rank 0 at its floor and rank 1
    wandering 9 to 25 ms (the load on rank 1's core alone: the clean trial the watch named at a load of 5 to 7);
    from ``slow_from`` rank 1's points 30 to 100 ms longer (a rank slowed by a real fault)."""
    rng = random.Random(seed)

    def floor() -> float:
        return 0.008 * rng.lognormvariate(0, 0.03)

    def point() -> float:
        return rng.uniform(0.009, 0.04) if rng.random() < 0.5 else floor()

    out = []
    for t in range(steps):
        r0, r1 = (floor(), rng.uniform(0.009, 0.025)) if t in stretch else (point(), point())
        if slow_from is not None and t >= slow_from:
            r1 += rng.uniform(0.03, 0.1)
        out.append({"rank 0": r0, "rank 1": r1})
    return out


@pytest.mark.parametrize("seed", range(10))
def test_a_rank_wandering_9_to_25_ms_beside_an_8_ms_peer_is_jitter_not_a_slowdown(seed):
    """A 2.3x ratio of two tiny times for 40 points (2 s of the watch's 50 ms points): slower than its peer by no
    more seconds than the ranks' gaps strayed before; 6 of these 10 seeds were named without the floor. (After such a
    stretch, rank 0's jitter coming back beside its floor is another matter: a rank named on it in 1 of 20 seeds here,
    3 without the floor.)"""
    assert _run(_jittery(seed, steps=150, stretch=range(100, 140)), 2) == []


@pytest.mark.parametrize("seed", range(10))
def test_a_rank_slowed_by_tens_of_ms_on_the_same_jittery_host_is_named(seed):
    (flag,) = _run(_jittery(seed, slow_from=100), 2)
    assert flag.target == "rank 1" and 98 <= flag.onset <= 104 and flag.detected < 100 + 2 * detect.MIN_AFTER


def test_the_absolute_floor_is_the_hosts_jitter_in_seconds():
    """The floor is a quantile of how far each target's gap to its peers strayed from its usual before the onset:
    one step in four 1 ms (then 20 ms) slower than its peer sets it at 1 ms (then 20 ms); the gaps since the onset
    must reach it on their median and on each half's."""
    d = detect.Detector("compute", "rank", {"rank 0": (0,), "rank 1": (1,)})
    for t in range(40):
        d.add({"rank 0": 0.01, "rank 1": 0.01 + (0.001 if t % 4 == 0 else 0.0)})
    assert d.jitter(0, 40) == pytest.approx(0.001)
    for t in range(40):
        d.add({"rank 0": 0.01, "rank 1": 0.01 + (0.02 if t % 4 == 0 else 0.0)})
    assert d.jitter(40, 80) == pytest.approx(0.02)
    assert detect.above([0.02] * 12, 0.02) and not detect.above([0.019] * 12, 0.02)
    assert not detect.above([0.05] * 6 + [0.0] * 6, 0.02)  # it ended halfway


@pytest.mark.parametrize("seed", range(8))
def test_an_early_lopsided_stretch_does_not_mask_a_later_onset(seed):
    """Rank 1 at 1.3x its peer for 14 steps from step 20 (the first steps of a loaded host's run, lopsided), then
    even again, then twice as slow from step 60: named from step 60. The CUSUM crosses on the early stretch, whose
    onset has too short a past to be named; it used to wait on that crossing for MAX_PENDING steps and start over
    after them, past the real onset: named from a later one (steps 65 to 67), or not at all (4 of these 8 seeds)."""
    series = _series(seed, 2, 110, {1: 2.0}, 60)
    for t in range(20, 34):
        series[t]["rank 1"] *= 1.3
    (flag,) = _run(series, 2)
    assert flag.target == "rank 1" and flag.onset == 60 and flag.detected < 60 + 2 * detect.MIN_AFTER


def _exchanges(steps_s: list[float], cost_s: float, checks: bool = True) -> list[float]:
    """The times (s) at which one rank following ``watch.Cadence`` exchanges, for steps of ``steps_s`` and an
    exchange costing ``cost_s`` (``checks`` False: the count of steps alone, as before the checks)."""
    cadence, every, rows, since, clock, out, last = watch.Cadence(), watch.EVERY, 0, 0.0, 0.0, [], []
    for step in steps_s:
        reduce = lambda x: lambda: x  # noqa: E731  one rank: the maximum over the ranks is its own
        if cadence.due(rows, every, clock - since, reduce) if checks else rows >= every:
            cadence.settle()
            every = watch.next_every(cost_s, sorted(last)[len(last) // 2])
            cadence.check = watch.check_every(sorted(last)[len(last) // 2])
            out.append(clock)
            rows, since, last = 0, clock, []
        clock += step
        rows += 1
        last.append(step)
    return out


def test_an_exchange_follows_steps_that_turn_15_times_slower_within_seconds():
    """A rank cut to 0.05 CPU: steps of 20 ms, then of 300 ms from 10 s on. Exchanges of 4 ms keep 40 steps between
    two (0.5% of 20 ms); counted alone, the first after the onset came after the rest of them, slow (9 s here); the
    checks bring it within ``GAP_S`` and a check's steps (3 s)."""
    steps = [0.02] * 500 + [0.3] * 200
    onset = sum(steps[:500])
    first = [min(t for t in _exchanges(steps, 0.004, checks) if t > onset) - onset for checks in (True, False)]
    assert first[0] <= watch.GAP_S + watch.CHECK * 0.3 < 9 <= first[1]  # the count alone: 30 slow steps
    # checks spaced by time: steps of 1.3 ms, one check per 0.1 s of them, not per 5 steps
    assert watch.check_every(0.0013) == 77 and watch.check_every(0.02) == watch.CHECK
    # steps that do not change: the count decides, as before (a check never exchanges sooner)
    assert _exchanges([0.02] * 500, 0.004) == _exchanges([0.02] * 500, 0.004, checks=False)


def test_a_rank_paused_as_the_pause_class_pauses_it_is_named_in_a_short_trials_seconds():
    """Points of 50 ms (compute 10 ms), rank 1 paused 1 s after every ``pause.RUN_S`` it runs from point 150, for the
    5 s of steps a trial whose first steps the load slowed had left after its onset; 1 pause in 3 falls where every
    rank's step grows alike (its own time shows nothing). At 1 s between pauses, 4 pauses and 3 seen: unnamed."""
    from suite.inject.classes import pause

    series, every, onset = _series(0, 2, 250, {}, 0, noise=0.15), round(pause.RUN_S / 0.05), 150
    for k, t in enumerate(range(onset + every, 250, every)):
        if k % 3 != 2:
            series[t]["rank 1"] += 1.0
    (flag,) = _pauses(series, 2)
    assert (flag.target, flag.events) == ("rank 1", pauses.EVENTS) and flag.onset > onset


def test_pauses_after_a_short_past_of_long_points_are_named():
    """A loaded bench trial: points of 3 steps of 40 ms, 43 of them before the onset; rank 1 paused 0.5 s after
    every 0.5 s it runs (a spike every 5 points), 1 pause in 3 unseen. With ``BASELINE`` (48) points of past asked
    for, the first pause was too early to be an onset and every later one had one before it: never named."""
    series, onset = _series(0, 2, 200, {}, 0, noise=0.15), 43
    for k, t in enumerate(range(onset, 200, 5)):
        if k % 3 != 2:
            series[t]["rank 1"] += 0.5
    (flag,) = _pauses(series, 2)
    assert (flag.target, flag.onset, flag.before) == ("rank 1", onset, onset - pauses.WARMUP)
