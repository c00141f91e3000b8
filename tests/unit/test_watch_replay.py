"""The watch's point series kept in the record (suite/watch/replay.py) and its detectors replayed on it: the same
flags at the same points as the run raised, from the record alone."""

from __future__ import annotations

import json
import random

import pytest

from suite.watch import replay, watch


def _points(seed: int, n: int = 160, slow_from: int | None = 100, paused: bool = False) -> replay.Points:
    """2 ranks' points of 10 ms compute (log-normal noise) fed as the watch feeds them; rank 1 twice as slow from
    ``slow_from`` (``paused``: stopped 0.5 s every 12 points from there instead)."""
    rng = random.Random(seed)
    p = replay.Points([0, 1], {"node0": (0, 1)})
    flags = []
    for t in range(n):
        c = [0.01 * rng.lognormvariate(0, 0.05) for _ in range(2)]
        h = list(c)
        if slow_from is not None and t >= slow_from:
            if paused:
                h[1] += 0.5 if (t - slow_from) % 12 == 0 else 0.0
            else:
                c[1] *= 2
                h[1] *= 2
        flags += [(t, f) for f in p.add(3 * t, 0.03 * t, c, h)]
    p.flags = flags
    return p


@pytest.mark.parametrize("paused", [False, True])
def test_a_kept_series_replays_to_the_flags_the_run_raised(paused):
    live = _points(0, paused=paused)
    kept = json.loads(json.dumps(live.kept()))  # as the record holds it
    assert len(kept["step"]) == 160 and kept["step"][:3] == [0, 3, 6] and kept["ranks"] == [0, 1]
    ((at, flag),) = live.flags
    assert flag.target == "rank 1" and flag.test == ("pauses" if paused else "rank-sum")
    assert replay.replay(kept) == live.flags


def test_a_clean_series_replays_to_nothing_and_values_keep_a_tenth_of_a_microsecond():
    live = _points(1, slow_from=None)
    assert live.flags == [] == replay.replay(live.kept())
    assert replay.us(0.0123456789) == pytest.approx(0.0123457, abs=1e-12)


def test_the_replay_command_prints_each_flag_from_a_runs_record(tmp_path, capsys):
    kept = _points(2).kept()
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"benchmarks": [{"name": "test_ddp[case]", "extra_info": {"watch_series": kept}}]}))
    assert replay.main([str(bench)]) == 0
    out = capsys.readouterr().out
    assert "test_ddp[case]: 160 points, 1 flag(s)" in out and "# slow: rank 1 compute 2.0x since step 300" in out


def test_a_record_without_a_series_is_one_line_and_status_2(tmp_path, capsys):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"benchmarks": [{"name": "x", "extra_info": {}}]}))
    assert replay.main([str(bench)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert replay.main([str(tmp_path / "none.json")]) == 2


def test_the_watch_keeps_its_points_in_its_record(ctx, monkeypatch):
    """One rank on a real Gloo group, its clock moved by the test: steps of 20 ms, points of 3 steps (50 ms)."""
    import torch.nn as nn

    now = [100.0]
    monkeypatch.setattr(watch.time, "perf_counter", lambda: now[0])
    w = watch.Watch(ctx, None, nn.Linear(2, 1))
    step = w.wrap(lambda: now.__setitem__(0, now[0] + 0.02))
    for _ in range(40):
        step()
        w.before_sample()
    series = w.finish()["watch_series"]
    assert series["ranks"] == [0] and series["step"][:2] == [0, 3] and len(series["step"]) == 13
    assert series["t_s"][1] == pytest.approx(0.06) and series["compute_us"][0] == [20000.0]
