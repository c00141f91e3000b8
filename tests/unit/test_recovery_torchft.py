"""The torchft strategy's pure parts: bad input (one line, status 2, before anything starts), the seeded data
order, and the checker that compares the replicas' logs with the one-process reference of the committed steps
(fed made-up logs here; tests/dist/test_recovery_torchft_dist.py runs the real replicas)."""

import pytest

from experiments.recovery import torchft_check as check
from experiments.recovery import torchft_strategy
from experiments.recovery.torchft_data import sample_ids
from experiments.recovery.plan import Fault, Plan, PlanError, check_plan
from experiments.recovery.torchft_strategy import main

BAD = {
    "unknown fault class": (["--fault", "stop:1:3"], "unknown fault class 'stop'"),
    "target beyond the world": (["--fault", "kill:2:3"], "fault target rank 2 is beyond the world of 2 ranks"),
    "fault after the run": (["--fault", "kill:1:20"], "fault step 20 is outside the run"),
    "not kind:replica:step": (["--fault", "kill-1"], "is not kind:replica:step"),
    "one replica group": (["--groups", "1"], "at least 2 replica groups"),
    "unknown plant": (["--plant", "nothing"], "unknown planted bug 'nothing'"),
    "stale without a fault": (["--plant", "stale"], "needs a fault"),
    "plant step after the run": (["--plant", "phantom", "--plant-step", "20"], "planted bug step 20 is outside"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_status_2(case, tmp_path, capsys):
    args, said = BAD[case]
    assert main(["--steps", "20", "--workdir", str(tmp_path / "w"), *args]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1
    assert not list((tmp_path / "w").glob("replica*")), "nothing may start"


def test_a_workdir_that_cannot_be_written_is_bad_input(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["--workdir", str(tmp_path / "file" / "w")]) == 2
    assert "cannot be written" in capsys.readouterr().err


def test_the_data_order_is_seeded_and_no_two_replicas_share_a_sample_in_a_step():
    a = [sample_ids(0, 5, r, 3, 32, 10_000) for r in range(3)]
    assert a == [sample_ids(0, 5, r, 3, 32, 10_000) for r in range(3)]
    assert len({i for ids in a for i in ids}) == 96
    assert a[0] != sample_ids(1, 5, 0, 3, 32, 10_000) and a[0] != sample_ids(0, 6, 0, 3, 32, 10_000)


def _rows(plan: Plan, ns: list[int]) -> tuple[list[dict], list[str]]:
    """A clean made-up log: replica 0 commits every step, replica 1 the steps with 2 replicas."""
    shas, _ = check.reference(plan, {s: {"n": n} for s, n in enumerate(ns)})
    rows, t = [], 0.0
    for s, n in enumerate(ns):
        for g in range(n):
            t += 1
            rows.append({"kind": "step", "replica": g, "life": 0, "step": s, "ok": True, "n": n, "rank": g})
            rows[-1] |= {"t": t, "t0": t - 0.5, "sha": shas[s + 1]}
    return rows, shas


def test_the_checker_passes_a_clean_log_and_names_the_first_wrong_step(tmp_path):
    plan = Plan(steps=4, workdir=str(tmp_path))
    rows, shas = _rows(plan, [2, 1, 2, 2])  # replica 1 missing from step 1
    assert check.verify(plan, rows, tmp_path)["bitwise"]
    log = check.committed_log(plan, check.committed_steps(rows))
    b = plan.batch_per_rank
    assert [len(c["dropped"]) for c in log] == [0, b, 0, 0] and check.timings(plan, rows, log)["samples_dropped"] == b

    stale = [*rows[:3], {"kind": "heal", "replica": 1, "life": 1, "step": 2, "t": 3.5, "sha": shas[1]}, *rows[3:]]
    with pytest.raises(check.RecoveryMismatch, match="^step 2: replica 1 healed with weights"):
        check.verify(plan, stale, tmp_path)

    phantom = [dict(r) for r in rows]
    phantom[4]["sha"] = shas[2]  # replica 1 says it committed step 2 but holds the weights before it
    with pytest.raises(check.RecoveryMismatch, match="^step 2: replica 1's weights differ"):
        check.verify(plan, phantom, tmp_path)


def test_a_step_committed_with_two_different_quorums_is_named(tmp_path):
    plan = Plan(steps=2, workdir=str(tmp_path))
    rows, _ = _rows(plan, [2, 2])
    rows[3]["n"] = 1
    with pytest.raises(check.RecoveryMismatch, match="^step 1: committed with 2 replicas by one and 1 by another"):
        check.verify(plan, rows, tmp_path)


def test_with_three_replicas_the_replicas_are_checked_against_each_other(tmp_path):
    plan = Plan(steps=3, world=3, workdir=str(tmp_path))
    rows, shas = _rows(plan, [3, 3, 3])
    assert not check.verify(plan, rows, tmp_path)["bitwise"]
    rows[4]["sha"] = shas[1]  # replica 1 says it committed step 1 but holds the weights before it
    with pytest.raises(check.RecoveryMismatch, match="^step 1: replica 1's weights differ from its peers'"):
        check.verify(plan, rows, tmp_path)


def test_a_run_that_overruns_its_timeout_is_one_line_and_status_1(tmp_path, capsys):
    assert main(["--workdir", str(tmp_path / "w"), "--timeout", "0.001"]) == 1
    err = capsys.readouterr().err
    assert err == "torchft: the replica groups were not ready within 0.001 s\n"


def test_a_fault_free_run_with_uneven_steps_reads_an_ettr_of_at_most_one(tmp_path):
    """Back-to-back steps of 0.1, 1 and 1 s on both replicas: all of the wall time is training, ETTR 1. The
    median step (1 s) would read 3 x 1 / 2.1 = 1.43."""
    plan = Plan(steps=3, workdir=str(tmp_path))
    rows, _ = _rows(plan, [2, 2, 2])
    for r in rows:  # replica 1 a millisecond behind replica 0
        end = {0: 0.1, 1: 1.1, 2: 2.1}[r["step"]] + r["replica"] * 1e-3
        r["t0"], r["t"] = end - (0.1 if r["step"] == 0 else 1.0), end
    out = check.timings(plan, rows, check.committed_log(plan, check.committed_steps(rows)))
    assert out["step_s_clean"] == pytest.approx(0.7, abs=2e-3)
    assert out["ettr"] == pytest.approx(1.0, abs=2e-3) and out["ettr"] <= 1.0


def test_one_plan_and_one_plan_error_serve_both_strategies(tmp_path):
    plan = Plan(steps=10, world=1, workdir=str(tmp_path / "w"))
    check_plan(plan)  # the elastic strategy runs a job of one rank
    with pytest.raises(PlanError, match="^torchft needs at least 2 replica groups, got a world of 1$"):
        torchft_strategy.validate(plan)
    with pytest.raises(PlanError, match="fault target rank 3 is beyond the world of 2 ranks"):
        torchft_strategy.validate(Plan(steps=10, faults=(Fault(kind="kill", rank=3, step=2),), workdir=plan.workdir))
