"""The CPU outside the run on a rank's host (suite/watch/foreign.py): measured per exchange, kept per point of the
watch's series, and a flag raised while it was a quarter or more of the host's classed ``foreign load``."""

from __future__ import annotations

import json
import random
import time

import pytest

from suite.watch import detect, foreign, replay, watch


def test_the_cpu_outside_the_run_is_the_kernels_busy_time_less_its_ranks():
    """Ranks 0 and 1 on one kernel (local ranks, or two compose nodes on one host), rank 2 on another: over the
    interval the first kernel was busy 1.5 of its 2 CPU s, its two ranks used 0.5 and 0.4; the second kernel was busy
    0.9 of 2, its rank used all of it but 0.1 (a counter read a moment later: clamped at nothing)."""
    before = [(7.0, 10.0, 20.0, 1.0, 0.0), (7.0, 10.1, 20.1, 2.0, 0.0), (9.0, 5.0, 8.0, 3.0, 0.0)]
    now = [(7.0, 11.5, 22.0, 1.5, 0.0), (7.0, 11.6, 22.1, 2.4, 0.0), (9.0, 5.9, 10.0, 4.0, 0.0)]
    assert foreign.shares(before, now) == [30.0, 30.0, 0.0]
    assert foreign.shares(before, before) == [None, None, None]  # no time passed: not measured


def test_a_share_of_a_quarter_or_more_classes_a_flag_foreign_load():
    assert foreign.classed(None) == foreign.classed(foreign.FOREIGN_PCT - 0.1) == "slowdown"
    assert foreign.classed(foreign.FOREIGN_PCT) == "foreign load"


def test_a_sample_reads_this_kernels_counters_and_this_process_cpu():
    a = foreign.sample()
    t = time.process_time()
    while time.process_time() - t < 0.05:  # this process's own CPU: the run's, never outside it
        pass
    b = foreign.sample()
    assert a[0] == b[0] and len(a) == foreign.FIELDS == watch._ROW
    assert b[2] > a[2] and b[2] - b[1] >= 0 and b[3] - a[3] >= 0.04


def _points(foreign_pct: float | None, seed: int = 0) -> replay.Points:
    """2 ranks' points of 8 ms compute, rank 1 three times as slow from point 100, with ``foreign_pct`` of the host's
    CPU used outside the run at every point."""
    rng = random.Random(seed)
    p = replay.Points([0, 1], {"node0": (0, 1)})
    p.flags = []
    for t in range(160):
        c = [0.008 * rng.lognormvariate(0, 0.05) for _ in range(2)]
        c[1] *= 3 if t >= 100 else 1
        p.flags += [(t, f) for f in p.add(2 * t, 0.05 * t, c, list(c), [foreign_pct, foreign_pct])]
    return p


@pytest.mark.parametrize(("pct", "said"), [(60.0, "foreign load"), (3.0, "slowdown"), (None, "slowdown")])
def test_a_flag_carries_the_cpu_outside_the_run_since_its_onset_and_replays_to_it(pct, said):
    """The same slowed rank is named whatever its host's load (the class is evidence, not a filter: a clean host's
    rank is named as ever); the flag carries the mean since its onset, and a replay of the kept series the same."""
    p = _points(pct)
    ((at, flag),) = p.flags
    assert flag.target == "rank 1" and flag.foreign == pct and foreign.classed(flag.foreign) == said
    assert replay.replay(json.loads(json.dumps(p.kept()))) == p.flags
    text = detect.line(flag, 1.0)
    assert ("foreign load: processes outside the run used 60% of its host's CPU" in text) == (said == "foreign load")


def test_a_flags_share_is_the_mean_since_its_onset_over_its_ranks_hosts():
    p = replay.Points([0, 1], {})
    p.series["foreign_pct"] = [[90.0, 0.0]] * 10 + [[10.0, 50.0]] * 5 + [[30.0, 70.0]] * 5
    f = detect.Flag("rank", "rank 0", (0,), "compute", 10, 19, 2.0, 2.0, 1e-9)
    assert p.foreign_since(f) == 20.0
    assert p.foreign_since(detect.Flag("node", "node0", (0, 1), "compute", 15, 19, 2.0, 2.0, 1e-9)) == 50.0


def test_a_series_kept_before_the_cpu_was_measured_replays():
    kept = _points(None).kept()
    del kept["foreign_pct"]
    ((_, flag),) = replay.replay(kept)
    assert flag.target == "rank 1" and flag.foreign is None


def test_the_watch_measures_the_cpu_outside_the_run_at_each_exchange(ctx, monkeypatch):
    """One rank on a real Gloo group, its counters moved by the test: per exchange the kernel busy 1.2 of 2 CPU s,
    the rank 0.4 of them: 40% outside the run, on every point after the first exchange and in the record."""
    import torch.nn as nn

    n = [0]

    def sample():
        n[0] += 1
        return (1.0, 1.2 * n[0], 2.0 * n[0], 0.4 * n[0], 0.0)

    monkeypatch.setattr(foreign, "sample", sample)
    now = [100.0]
    monkeypatch.setattr(watch.time, "perf_counter", lambda: now[0])
    w = watch.Watch(ctx, None, nn.Linear(2, 1))
    step = w.wrap(lambda: now.__setitem__(0, now[0] + 0.02))
    for _ in range(40):
        step()
        w.before_sample()
    rec = w.finish()
    assert n[0] >= 3 and rec["watch_foreign_cpu_pct"] == 40.0 == rec["watch_foreign_cpu_pct_max"]
    assert rec["watch_series"]["foreign_pct"][-1] == [40.0]
