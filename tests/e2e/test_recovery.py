"""The recovery experiment through the launcher (as ``make bench-cpu EXPERIMENTS=recovery`` runs it): 2 suite
ranks, a 2-rank job of 6 steps with a checkpoint every 2, rank 1 killed at step 3, and killed 0.01 s after the
job's start (a wall-clock fault: it strikes elastic's first start, and torchft's first step), under each strategy. The
elastic recovery ends bitwise equal to the fault-free job, torchft's equal to the one-process reference of the
steps it committed; the planted bug (rank 1 alone restores an older checkpoint than the one claimed: every
rank's state is checked, not rank 0's alone) is a wrong result, exit status 6, naming the step where the state
went wrong and the rank. Bad input is exit 2 before any rank
starts. The two runs share RECOVERY_DIR, so the fault-free reference job runs once."""

from __future__ import annotations

import pytest

from suite import results
from tests.conftest import run_suite

pytestmark = pytest.mark.slow

SHORT = {"RECOVERY_FAULTS": "kill:1@3", "RECOVERY_STEPS": "6", "RECOVERY_CKPT_EVERY": "2", "RECOVERY_TIMEOUT_S": "5"}


def _launch(tmp_path, run_id, **env):
    env = {**SHORT, "RECOVERY_DIR": str(tmp_path / "ckpt"), **env}
    return run_suite(tmp_path, "--experiments", "recovery", env=env, run_id=run_id, timeout=400)


def test_a_killed_rank_recovers_bitwise_and_the_planted_bug_is_status_6(tmp_path):
    good = _launch(tmp_path, "good", RECOVERY_FAULTS="kill:1@3,kill:1@0.01s")
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-3000:]
    records = results.records(results.load_run(tmp_path / "results" / "good"))
    rec, at_start, ft, ft_clock = sorted(records, key=lambda r: (r["strategy"], len(r["fault"])))
    strategies = [r["strategy"] for r in (rec, at_start, ft, ft_clock)]
    assert strategies == ["elastic", "elastic", "torchft", "torchft"]
    assert [r["heals_from_peer"] for r in (rec, at_start, ft, ft_clock)] == [False, False, True, True]  # ETTR reads it
    # a wall-clock fault 0.01 s after the job's start strikes it while it starts: its first attempt is lost
    assert at_start["fault"] == "kill:1@0.01s" and at_start["exact"] is True and at_start["n_wrong"] == 0
    assert [(f["struck"], f["at_s"]) for f in at_start["per_fault"]] == [("restart", 0.01)]
    assert at_start["steps_redone"] == 0 and at_start["t_recover"] > 0
    assert ft["exact"] is True and ft["n_wrong"] == 0 and ft["ckpt_save_s"] is None
    assert ft["t_detect"] > 0 and ft["t_recover"] > 0 and any(e["kind"] == "fault" for e in ft["events"])
    # torchft counts a wall-clock fault from its first step: 0.01 s in, it strikes replica 1 training
    assert ft_clock["exact"] is True and ft_clock["fault"] == "kill:1@0.01s"
    assert [(e["at_s"], e["struck"]) for e in ft_clock["events"] if e["kind"] == "fault"] == [(0.01, "step")]
    assert rec["exact"] is True and rec["n_wrong"] == 0 and rec["fault"] == "kill:1@3"
    assert rec["steps_redone"] == 1 and rec["samples_dropped"] == 0  # killed at step 3, restored step 2
    assert 0 < rec["t_detect"] < rec["t_recover"] and rec["ckpt_load_s"] > 0
    kinds = {(e["rank"], e["kind"]) for e in rec["events"]}
    assert {(1, "fault"), (0, "recover"), (1, "recover")} <= kinds and any(k == "detect" for _, k in kinds)

    bad = _launch(tmp_path, "bad", RECOVERY_BUG="older_ckpt_rank1", RECOVERY_STRATEGIES="elastic")
    assert bad.returncode == 6, bad.stdout[-3000:] + bad.stderr[-3000:]
    (rec,) = results.records(results.load_run(tmp_path / "results" / "bad"))
    # rank 0 restored the right state: checked alone, it saw the step after, through rank 1's gradients
    assert rec["exact"] is False and rec["wrong_step"] == 2
    assert "went wrong at step 2: rank 1's state restored as step 2" in rec["wrong"]


def test_bad_input_is_one_line_and_status_2_before_any_rank(tmp_path):
    p = _launch(tmp_path, "bad-input", RECOVERY_FAULTS="kill:5@3")
    assert p.returncode == 2 and "fault target rank 5 is beyond the world of 2 ranks" in p.stderr, p.stderr
    assert not (tmp_path / "results" / "bad-input" / "bench.json").exists()
