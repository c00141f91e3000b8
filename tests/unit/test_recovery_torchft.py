"""The torchft strategy's pure parts: bad input (one line, status 2, before anything starts), the seeded data
order, and the checker that compares the replicas' logs with the one-process reference of the committed steps
(fed made-up logs here; tests/dist/test_recovery_torchft_dist.py runs the real replicas)."""

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from experiments.recovery import torchft_check as check
from experiments.recovery import torchft_strategy
from experiments.recovery.torchft_data import sample_ids
from experiments.recovery.plan import Fault, Plan, PlanError, check_plan
from experiments.recovery.schedule import KEPT, continue_stopped, keeps_one, poisson_faults
from experiments.recovery.torchft_strategy import main

BAD = {
    "unknown fault class": (["--fault", "disconnect:1@3"], "unknown fault class 'disconnect' for torchft"),
    "a class of no strategy": (["--fault", "explode:1@3"], "unknown fault class 'explode' in 'explode:1@3'"),
    "two faults at one step": (["--fault", "stop:1@3", "--fault", "kill:0@3"], "two faults at step 3"),
    "two faults at one step, one flag": (["--fault", "stop:1@3,kill:0@3"], "two faults at step 3"),
    "poisson without failures": (["--fault", "poisson:0"], "poisson needs a mean time between failures > 0"),
    "no collective timeout": (["--op-timeout", "0"], "the collective timeout must be > 0 s"),
    "every replica struck": (["--fault", "kill:0@3", "--fault", "kill:1@4"], "strikes all 2"),
    "a wall-clock stop": (["--fault", "stop:1@2s"], "wall-clock fault stop:1@2.00s: only kills"),
    "steps and seconds": (["--fault", "kill:1@3", "--fault", "kill:1@2s"], "either in steps or in wall-clock"),
    "not a time": (["--fault", "kill:1@xs"], "fault 'kill:1@xs': 'x' is not a number"),
    "target beyond the world": (["--fault", "kill:2@3"], "fault target rank 2 is beyond the world of 2 ranks"),
    "fault after the run": (["--fault", "kill:1@20"], "fault step 20 is outside the run"),
    "not <class>:<rank>@<step>": (["--fault", "kill-1"], "unknown fault class 'kill-1'"),
    "the old kind:replica:step": (["--fault", "kill:1:3"], "fault 'kill:1:3': spell it <class>:<rank>@<step>"),
    "a fractional replica": (["--fault", "kill:1.5@3"], "fault 'kill:1.5@3': '1.5' is not a whole number"),
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


def test_torchft_keeps_one_replica_group_alive():
    """Kills of both replicas in quick succession would leave no live peer to heal from: a spelled schedule that
    strikes every replica group is refused, and a Poisson schedule's draws spare replica KEPT."""
    keeps_one([Fault(kind="kill", rank=1, step=3), Fault(kind="stop", rank=1, step=5)], 2)
    with pytest.raises(PlanError, match="^torchft needs one replica group that no fault strikes .* strikes all 2$"):
        keeps_one([Fault(kind="kill", rank=1, step=3), Fault(kind="stop", rank=0, step=5)], 2)
    for world in (2, 3):
        drawn = poisson_faults(seed=0, mtbf=2, steps=200, world=world, keep=KEPT)
        assert len(drawn) > 20 and {f.rank for f in drawn} == set(range(world)) - {KEPT}
    assert {f.rank for f in poisson_faults(seed=0, mtbf=2, steps=200, world=2)} == {0, 1}  # elastic: any rank
    for poisson in ("poisson:2", "poisson:2s"):  # the command line's draws, in steps or seconds, spare it too
        drawn = torchft_strategy.parse(["--workdir", "w", "--steps", "200", "--fault", poisson]).faults
        assert len(drawn) > 20 and {f.rank for f in drawn} == {1}


def test_each_life_of_a_replica_strikes_its_stops_then_the_kill_that_ends_it(tmp_path):
    faults = (("stop", 1, 2), ("kill", 1, 4), ("kill", 0, 5), ("stop", 1, 6), ("kill", 1, 7), ("stop", 1, 9))
    plan = Plan(steps=12, workdir=str(tmp_path), faults=tuple(Fault(kind=k, rank=r, step=s) for k, r, s in faults))
    replicas = torchft_strategy.Replicas(plan, "http://lighthouse")

    def f(kind, step):
        return {"kind": kind, "step": step, "at_s": None}

    assert replicas.faults_of(1, 0) == [f("stop", 2), f("kill", 4)]
    assert replicas.faults_of(1, 1) == [f("stop", 6), f("kill", 7)]
    assert replicas.faults_of(1, 2) == [f("stop", 9)] and replicas.faults_of(1, 3) == []
    assert replicas.faults_of(0, 0) == [f("kill", 5)] and replicas.faults_of(0, 1) == []
    assert [replicas.dies(1, life) for life in range(4)] == [True, True, False, False]


def test_a_wall_clock_kill_ends_the_life_it_falls_in_once_and_none_strikes_after_the_run(tmp_path):
    faults = tuple(Fault(kind="kill", rank=1, step=0, at_s=t) for t in (0.5, 0.1))  # given out of order
    replicas = torchft_strategy.Replicas(Plan(steps=12, workdir=str(tmp_path), faults=faults), "http://lighthouse")
    assert [f["at_s"] for f in replicas.faults_of(1, 0)] == [0.1] and replicas.dies(1, 1)
    replicas.procs = {g: subprocess.Popen(["sleep", "30"]) for g in (0, 1)}
    log = replicas.path(1, 0, "jsonl")
    log.write_text('{"kind": "ready", "t": 1, "step": 0}\n{"kind": "step", "t": 2, "step": 4, "ok": true}\n')
    try:
        replicas.strike()  # before the first step: nothing is due
        replicas.t_go = time.time() - 0.2  # 0.2 s into the run: the first kill is due, the second is not
        replicas.strike()
        replicas.strike()  # once: the life it ended is not struck again
        assert replicas.procs[1].poll() == -signal.SIGKILL and replicas.procs[0].poll() is None
        (event,) = [json.loads(x) for x in log.read_text().splitlines() if '"fault"' in x]
        assert (event["at_s"], event["struck"], event["step"], event["pid"]) == (0.1, "step", 5, replicas.procs[1].pid)
        # the replacement (life 1) has not healed when its kill falls due: it strikes the restart
        replicas.lives[1], replicas.procs[1] = 1, subprocess.Popen(["sleep", "30"])
        replicas.path(1, 1, "jsonl").write_text('{"kind": "wake", "t": 3}\n')
        replicas.path(0, 0, "jsonl").write_text('{"kind": "done", "t": 3, "step": 12}\n')
        replicas.t_go -= 1.0
        replicas.strike()  # replica 0 has finished the run: the job is over, no kill strikes
        assert replicas.procs[1].poll() is None
        replicas.path(0, 0, "jsonl").write_text("")
        replicas.strike()
        assert replicas.procs[1].poll() == -signal.SIGKILL
        assert json.loads(replicas.path(1, 1, "jsonl").read_text().splitlines()[-1])["struck"] == "restart"
    finally:
        replicas.stop()


def test_a_replica_killed_again_as_it_starts_has_a_warm_spare_for_that_too(tmp_path):
    """Two spares ahead: the replacement that a second kill strikes as it starts is replaced by a spare already
    warm, not by one started only then (still importing torch, seconds, when its peers finish)."""
    faults = tuple(Fault(kind="kill", rank=1, step=s) for s in (2, 3, 4))
    replicas = torchft_strategy.Replicas(Plan(steps=12, workdir=str(tmp_path), faults=faults), "http://lighthouse")
    launched = []
    replicas.launch = lambda g, life: launched.append((g, life)) or subprocess.Popen(["sleep", "30"])
    try:
        replicas.start()
        assert launched == [(0, 0), (1, 0), (1, 1), (1, 2)]
        for life, started in ((1, (1, 3)), (2, (1, 3)), (3, (1, 3))):  # kills end lives 0, 1 and 2; life 3 lives
            replicas.procs[1].kill()
            replicas.procs[1].wait()
            replicas.poll()
            assert replicas.lives[1] == life and launched[-1] == started and replicas.path(1, life, "wake").exists()
        assert len(launched) == 5 and replicas.spares[1] == []
    finally:
        replicas.stop()


def test_a_stopped_process_is_continued_once_past_its_stop_time():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        proc.send_signal(signal.SIGSTOP)
        assert _reaches(proc.pid, "T")
        events = [{"kind": "fault", "fault": "stop", "pid": proc.pid, "t": time.time()}]
        woken: set[int] = set()
        continue_stopped(events, 60.0, woken)  # stopped just now: it stays stopped
        assert woken == set() and _reaches(proc.pid, "T")
        continue_stopped([{**events[0], "t": time.time() - 61}], 60.0, woken)
        assert woken == {proc.pid} and _reaches(proc.pid, "S")
        continue_stopped([{**events[0], "t": time.time() - 61}], 60.0, woken)  # once: not sent again
        assert woken == {proc.pid}
    finally:
        proc.kill()
        proc.wait()


def _reaches(pid: int, state: str) -> bool:
    """Whether the process's state letter in /proc (T: stopped, S: sleeping) becomes ``state``."""
    for _ in range(500):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == state:
            return True
        time.sleep(0.01)
    return False


def test_a_stopped_replica_rejoins_at_the_first_step_every_replica_commits(tmp_path):
    """A stopped replica is the same process (life 0) when it heals and rejoins: the job is at full strength
    again at the first step committed by every replica, whichever life it is."""
    plan = Plan(steps=4, workdir=str(tmp_path))
    rows, _ = _rows(plan, [2, 1, 1, 2])
    fault = {"kind": "fault", "replica": 1, "life": 0, "step": 1, "t": 2.2, "fault": "stop", "pid": 1}
    rows = sorted([*rows, fault], key=lambda r: r["t"])
    out = check.timings(plan, rows, check.committed_log(plan, check.committed_steps(rows)))
    assert out["t_recover"] == pytest.approx(3 - 2.2) and out["t_rejoin"] == pytest.approx(5 - 2.2)
