"""The run's time by phase (suite.phase_seconds in bench.json, one summary line)."""

import time

import pytest

from suite.harness import phases


def test_breakdown_adds_phases_and_leaves_the_rest_to_other():
    p = phases.Phases()
    p.add("timed", 2.0)
    p.add("check", 0.5)
    p.add("timed", 1.0)
    with p("write"):
        pass
    out = p.breakdown(wall_s=10.0)
    assert out["timed"] == 3.0 and out["check"] == 0.5 and "write" in out
    assert out["other"] == pytest.approx(10.0 - 3.5 - out["write"], abs=1e-3)
    assert list(out) == [k for k in phases.ORDER if k in out]  # the order of a case


def test_other_is_never_negative():
    p = phases.Phases()
    p.add("timed", 5.0)
    assert p.breakdown(wall_s=4.0)["other"] == 0.0


def test_unknown_phase_is_an_error():
    with pytest.raises(ValueError, match="unknown phase 'timing'"):
        phases.Phases().add("timing", 1.0)


def test_every_phase_is_explained():
    assert set(phases.ORDER) == set(phases.MEANING)


def test_summary_line_largest_first_with_shares():
    line = phases.summary_line({"timed": 30.0, "write": 10.0, "other": 60.0})
    assert line == "time by phase (rank 0, 100 s): other 60.0 s (60%), timed 30.0 s (30%), write 10.0 s (10%)"


def test_each_experiment_gets_its_cases_phases_and_the_rest_of_their_wall_time():
    p = phases.Phases()
    p.add("start", 1.0)  # the session's own: no experiment
    with p.of_experiment("sharded"):
        p.add("timed", 2.0)
        time.sleep(0.01)
    with p.of_experiment("p2p"):
        p.add("setup", 0.5)
    with p.of_experiment("sharded"):
        p.add("timed", 1.0)
    by = p.breakdown_by_experiment()
    assert set(by) == {"sharded", "p2p"}
    assert by["sharded"]["timed"] == 3.0 and "start" not in by["sharded"] and by["p2p"]["setup"] == 0.5
    assert by["sharded"]["other"] == 0.0  # the wall (~10 ms) is less than the phases added by hand
    with p.of_experiment("ddp"):
        time.sleep(0.05)
    assert p.breakdown_by_experiment()["ddp"] == {"other": pytest.approx(0.05, abs=0.2)}  # no phase claims it
    assert p.breakdown(wall_s=10.0)["timed"] == 3.0  # the session total still has every phase


def test_the_first_timed_phase_leaves_the_file_the_injector_counts_its_onset_from(tmp_path):
    from types import SimpleNamespace

    from suite.common import timed_start
    from suite.harness.journal.timeline import Timeline

    p = phases.Phases()
    p.timeline = Timeline(SimpleNamespace(run_dir=str(tmp_path), rank=3))
    with p("warmup"):
        pass
    assert not timed_start.path(tmp_path, 3).exists()
    with p("timed"):
        assert timed_start.path(tmp_path, 3).exists()


def test_the_first_timed_step_file_is_touched_once_a_session_not_at_every_round(tmp_path, monkeypatch):
    """Each round of timed samples enters the ``timed`` phase: only the first may cost a system call."""
    from types import SimpleNamespace

    from suite.common import timed_start
    from suite.harness.journal.timeline import Timeline

    calls = []
    monkeypatch.setattr(timed_start, "mark", lambda run_dir, rank: calls.append((run_dir, rank)))
    p = phases.Phases()
    p.timeline = Timeline(SimpleNamespace(run_dir=str(tmp_path), rank=1))
    for _ in range(5):
        with p("timed"):
            pass
    assert calls == [(str(tmp_path), 1)]
