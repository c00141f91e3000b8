"""The long elastic runs for the ETTR model's check (``python -m experiments.recovery.ettr_runs``, make
ettr-measure): their plans, the run record the model reads, and bad input (one line, status 2, nothing
started). The runs themselves take minutes: docs/measurements/ has their table."""

from __future__ import annotations

import pytest

from experiments.recovery import ettr_runs
from suite.model import ettr


def _args(tmp_path, *more: str):
    return ettr_runs.parser().parse_args(["--mtbf", "20,40", "--out", str(tmp_path / "r.json"), *more])


def test_each_rate_and_repeat_has_its_own_seeded_schedule(tmp_path):
    a = _args(tmp_path, "--run-s", "600", "--step-s", "0.1", "--repeats", "2", "--workdir", str(tmp_path / "w"))
    runs = ettr_runs.plans(a)
    assert [(m, r) for m, r, _ in runs] == [(20, 0), (40, 0), (20, 1), (40, 1)]
    assert runs == ettr_runs.plans(a)  # seeded
    plans = [p for _, _, p in runs]
    assert {p.steps for p in plans} == {6000} and {p.step_pad_s for p in plans} == {0.1}
    assert len({p.faults for p in plans}) == 4  # no two runs share a schedule
    assert len(plans[0].faults) > len(plans[1].faults) > 0  # twice the rate, more failures (seeded draws)


def test_the_record_spans_the_training_and_the_model_reads_it():
    events = [{"kind": "commit", "t": t, "rank": r} for r in (0, 1) for t in (12.0, 13.0, 20.0, 21.0)]
    events += [{"kind": "fault", "t": 13.5, "rank": 1}, {"kind": "detect", "t": 13.6, "rank": 0}]
    out = {"strategy": "elastic", "heals_from_peer": False, "steps": 3, "wall_s": 30.0, "step_s_clean": 1.0}
    out |= {
        "events": events,
        "t_detect": 0.1,
        "t_recover": 6.5,
        "steps_redone": 1,
        "ckpt_save_s": 0.2,
        "ckpt_load_s": 0.1,
    }
    out |= {"ckpt_every": 2, "exact": True}
    rec = ettr_runs.record(out, 1.2, 40.0, 0, (1.0, 2.0))
    assert rec["wall_s"] == 10.0 and rec["ettr"] == pytest.approx(0.36) and rec["launch_wall_s"] == 30.0
    assert rec["n_faults"] == 1 and rec["fault"] == "poisson:40s" and rec["mtbf_s"] == 40.0
    assert rec["step_s_clean"] == 1.2 and rec["step_s_timed"] == 1.0 and rec["heals_from_peer"] is False
    (row,) = ettr.validate([rec])
    assert row.failures == 1 and row.measured == pytest.approx(0.36)


def test_the_clean_step_is_the_fault_free_span_less_its_checkpoints_per_step():
    """10 steps of 1 s timed, each 0.1 s more in all, and 4 checkpoints (after steps 2, 4, 6, 8) of 0.5 s."""
    t, commits = 0.0, []
    for k in range(1, 11):
        t += 1.1
        commits.append({"kind": "commit", "t": t, "rank": 0})
        t += 0.5 if k % 2 == 0 and k < 10 else 0.0
    ref = {"steps": 10, "ckpt_every": 2, "ckpt_save_s": 0.5, "step_s_clean": 1.0, "events": commits}
    assert ettr_runs.span(ref) == pytest.approx(11 + 2 - 0.1)  # from the first step's start, as timed
    assert ettr_runs.clean_step_s(ref) == pytest.approx(1.09)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--mtbf", "20,x"], "is not a comma-separated list of seconds"),
        (["--mtbf", "0"], "every MTBF must be > 0 s"),
        (["--mtbf", "20", "--step-s", "0"], "--step-s must be > 0"),
        (["--mtbf", "20", "--ckpt-every", "100000"], "checkpoint interval 100000 must be between 1 and"),
    ],
)
def test_bad_input_is_one_line_and_status_2_before_any_rank_starts(tmp_path, capsys, args, says):
    assert ettr_runs.main([*args, "--workdir", str(tmp_path / "w"), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and err.startswith("ettr_runs: ")
    assert not (tmp_path / "w" / "events").exists() and not list((tmp_path / "w").glob("ref-*"))
