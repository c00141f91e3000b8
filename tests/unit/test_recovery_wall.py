"""The recovery experiment's wall-clock faults, pure logic: the seeded Poisson schedule in seconds from the job's
start, its spellings and bad input (one line), what a fault struck (a step or a restart) from the event files,
and how measure.py reads the runner's fault events beside the ranks'."""

from __future__ import annotations

import pytest

from experiments.recovery import measure, wall
from experiments.recovery.plan import Fault, Plan, PlanError, check_plan
from experiments.recovery.schedule import parse_faults, poisson_times
from experiments.recovery.settings import RecoverySettings
from experiments.recovery.strategies import torchft_runs
from experiments.recovery.table import timeline_lines


def test_the_wall_clock_poisson_schedule_is_seeded_in_seconds_and_spares_the_kept_rank():
    a = poisson_times(seed=3, mtbf_s=5.0, world=4, horizon_s=400)
    assert a == poisson_times(seed=3, mtbf_s=5.0, world=4, horizon_s=400)
    assert a != poisson_times(seed=4, mtbf_s=5.0, world=4, horizon_s=400)
    times = [f.at_s for f in a]
    assert times == sorted(times) and 0 < times[0] and times[-1] < 400
    assert {(f.kind, f.step) for f in a} == {("kill", 0)} and {f.rank for f in a} == {0, 1, 2, 3}
    assert 3.5 < 400 / len(a) < 7  # the mean gap is the MTBF, to within the spread of 80-odd draws
    # not rounded to steps: two failures can fall closer together than any step (one during the other's restart)
    assert min(b - a for a, b in zip(times, times[1:])) < 0.5
    assert 0 not in {f.rank for f in poisson_times(seed=3, mtbf_s=5.0, world=4, keep=0, horizon_s=400)}


def test_wall_clock_faults_parse_from_their_spellings():
    got = parse_faults("poisson:20s", world=2, steps=10, seed=0)
    assert got == tuple(poisson_times(seed=0, mtbf_s=20.0, world=2)) and got
    assert parse_faults("kill:1@2.5s", world=2, steps=10, seed=0) == (Fault(kind="kill", rank=1, step=0, at_s=2.5),)
    assert Fault(kind="kill", rank=1, step=0, at_s=2.5).spell() == "kill:1@2.50s"


@pytest.mark.parametrize(
    ("faults", "says"),
    [
        ("poisson:0s", "poisson needs a mean time between failures > 0 s"),
        ("stop:1@2s", "wall-clock fault stop:1@2.00s: only kills, at a time > 0 s"),
        ("kill:1@0s", "wall-clock fault kill:1@0.00s: only kills, at a time > 0 s"),
        ("kill:3@2s", "fault target rank 3 is beyond the world of 2 ranks"),
    ],
)
def test_a_bad_wall_clock_fault_is_one_line(tmp_path, faults, says):
    with pytest.raises(Exception, match=None) as e:
        RecoverySettings(faults=(faults,), ckpt_dir=str(tmp_path)).validate()
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_schedule_mixing_steps_and_seconds_is_refused(tmp_path):
    faults = parse_faults("kill:1@3,kill:0@2s", world=2, steps=10, seed=0)
    with pytest.raises(PlanError, match="either in steps or in wall-clock seconds"):
        check_plan(Plan(workdir=str(tmp_path), steps=10, ckpt_every=4, faults=faults))


def test_both_strategies_run_wall_clock_kills():
    assert torchft_runs((Fault(kind="kill", rank=1, step=3),))
    assert torchft_runs((Fault(kind="kill", rank=1, step=0, at_s=2.0),))
    assert not torchft_runs((Fault(kind="disconnect", rank=1, step=3),))


def _e(kind, rank, attempt, t, step=None, **kw):
    return {"kind": kind, "rank": rank, "attempt": attempt, "t": t, "step": step, "pid": 10 * attempt + rank, **kw}


def test_what_a_fault_struck_a_step_or_a_restart():
    events = [_e("restore", 0, 0, 1.0, 0), _e("restore", 1, 0, 1.1, 0), _e("commit", 1, 0, 1.5, 1)]
    assert wall.struck(events, 1, 0) == ("step", 1)
    assert wall.struck(events[:1], 1, 0) == ("restart", 0)  # rank 1 not restored yet: still starting
    assert wall.struck([*events, _e("detect", 0, 0, 2.0)], 1, 0) == ("restart", 1)  # its group is going down
    assert wall.struck(events, 1, 1) == ("restart", 0)  # the next attempt's process, before its restore


def test_the_runners_fault_events_are_measured_like_the_ranks():
    host = _e("fault", 1, 0, 2.0, 0, fault="kill", at_s=1.5, struck="restart")
    events = [_e("restore", 0, 0, 1.0, 0), host, _e("detect", 0, 0, 2.25), _e("restore", 0, 1, 3.0, 0)]
    events += [_e("commit", 0, 1, 4.0, 1)]
    (f,) = measure.per_fault(events)
    assert (f["struck"], f["at_s"], f["detect_s"], f["recover_s"]) == ("restart", 1.5, 0.25, 2.0)
    assert measure.per_fault([_e("fault", 1, 0, 2.0, 3, fault="kill")])[0]["struck"] == "step"


def test_a_fault_that_strikes_the_restart_after_another_is_measured_to_the_first_commit_after_it():
    # attempt 0 commits steps 1..7 (a checkpoint at 5), rank 1 killed; attempt 1 killed as it starts (a
    # wall-clock fault on its restart); attempt 2 restores step 5 and commits again
    events = [_e("restore", 0, 0, 0.0, 0), *[_e("commit", 0, 0, 0.1 * k, k) for k in range(1, 8)]]
    events += [_e("fault", 1, 0, 1.0, 7, fault="kill"), _e("detect", 0, 0, 1.25)]
    events += [_e("fault", 0, 1, 2.0, 0, fault="kill", at_s=1.9, struck="restart")]
    events += [_e("restore", 0, 2, 4.0, 5), _e("commit", 0, 2, 5.0, 6)]
    first, second = measure.per_fault(events)
    assert (first["recover_s"], first["redone"], first["detect_s"]) == (4.0, 2, 0.25)
    assert (second["recover_s"], second["redone"], second["struck"]) == (3.0, 0, "restart")


def test_the_timeline_marks_a_fault_that_struck_a_restart():
    events = [_e("fault", 1, 0, 11.0, 4, fault="kill"), _e("fault", 0, 1, 12.5, 0, fault="kill", struck="restart")]
    assert timeline_lines(measure.timeline(events, 10.0)) == [
        "#   rank 0: fault 2.50s (restart)",
        "#   rank 1: fault 1.00s (step 4)",
    ]
