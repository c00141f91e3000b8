"""The recovery experiment's elastic job across the compose nodes, pure logic: which jobs span the nodes and how
their agents meet, the disconnect's bad input in compose and outside it (one line), the attempt the ranks of one
rendezvous round agree on, the interface of a node connected again, the host's disconnect truth turned into the
fault that the job's records score, the host watcher writing a failed strike's truth, and when compose-run.sh
starts that watcher. No ranks start."""

from __future__ import annotations

import json
import threading
import time

import pytest

from experiments.recovery import disconnect, elastic, measure, wall, worker
from experiments.recovery.plan import Fault, Plan
from experiments.recovery.settings import RecoverySettings
from suite.api import ConfigError


@pytest.fixture
def compose(monkeypatch):
    """A node of a 3-node compose simulation."""
    for k, v in {"COMPOSE_SIM": "1", "NNODES": "3", "MASTER_ADDR": "node0"}.items():
        monkeypatch.setenv(k, v)


def test_in_compose_a_job_of_kills_or_disconnects_spans_the_nodes_and_a_stop_stays_on_one(compose, tmp_path):
    s = RecoverySettings(world=2, faults=("kill:1@3", "stop:1@3", "disconnect:1@2s"), ckpt_dir=str(tmp_path))
    s.validate()
    (_, kill), (_, stop), (_, cut) = s.schedules()
    plan = s.plan(kill, "sync", str(tmp_path / "run-1"), spanning=True)
    assert (plan.nnodes, plan.rdzv_endpoint) == (2, "node0:29400")  # NNODES=3, but a node per rank of 2 at most
    assert s.plan(stop, "sync", str(tmp_path), spanning=True).nnodes == 1  # a stop: node 0's one-node job
    assert s.plan(cut, "sync", str(tmp_path), spanning=True).nnodes == 2
    assert s.plan(kill, "none", str(tmp_path)).nnodes == 1  # torchft's job stays on node 0
    argv = elastic.torchrun_argv(plan, tmp_path / "plan.json")
    assert "--standalone" not in argv and "--max-restarts=1" in argv
    assert {"--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d", "--rdzv-endpoint=node0:29400"} <= set(argv)
    assert "--rdzv-id=run-1" in argv
    assert "--rdzv-conf=is_host=1" in argv  # node 0's agent hosts the rendezvous, whichever agent starts first
    assert "--rdzv-conf=is_host=0" in elastic.torchrun_argv(plan, tmp_path / "plan.json", node=1)
    assert "--standalone" in elastic.torchrun_argv(Plan(workdir=str(tmp_path)), tmp_path / "plan.json")


def test_a_compose_run_without_a_shared_folder_is_not_refused_and_its_job_stays_on_node0(compose):
    """Every experiment's knobs are validated on every run (suite/common/config.py): a compose run of other
    experiments, which compose-run.sh gives no RECOVERY_DIR, must pass (it was refused: CI, every compose test)."""
    s = RecoverySettings()
    s.validate()
    (_, faults), *_ = s.schedules()
    assert s.job_nodes() == 1 and s.plan(faults, "sync", "/tmp", spanning=True).nnodes == 1


@pytest.mark.parametrize(
    ("knobs", "says"),
    [
        ({"faults": ("disconnect:2@2s",)}, "RECOVERY: fault disconnect:2@2.00s: node 2 is beyond the job's 2 nodes"),
        ({"faults": ("disconnect:1@2",)}, "spell it disconnect:<node>@<seconds>s"),
        ({"faults": ("kill:1@3",), "world": 4}, "the job's 4 ranks cannot be spread evenly over 3 nodes"),
        ({"faults": ("disconnect:1@2s",), "ckpt_dir": ""}, "RECOVERY_DIR: a disconnect needs the job across the"),
    ],
)
def test_bad_input_in_compose_is_one_line(compose, tmp_path, knobs, says):
    with pytest.raises(ConfigError) as e:
        RecoverySettings(**{"ckpt_dir": str(tmp_path), **knobs}).validate()
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("timeout_s", "heartbeat_s", "refused"),
    [("5", "15", True), ("4", "15", False), ("5", "0", False), ("5", "16", False)],
)
def test_a_disconnect_stays_under_the_suites_heartbeat(compose, tmp_path, timeout_s, heartbeat_s, refused):
    """A disconnect's stretch (up to 3 x RECOVERY_TIMEOUT_S) holds the suite's ranks on the node off the network too:
    it must stay under HEARTBEAT_S (0: off), checked with the run's knobs (bad input, one line, before any rank
    starts). A stop holds a rank of the job alone, which the heartbeat does not watch: no such bound."""
    from suite.common.config import build_config

    knobs = {"faults": "disconnect:1@2s", "timeout_s": timeout_s, "ckpt_dir": str(tmp_path)}
    build_config(heartbeat_timeout_s="15", recovery={**knobs, "faults": "stop:1@3", "timeout_s": "9"})
    if not refused:
        build_config(heartbeat_timeout_s=heartbeat_s, recovery=knobs)
        return
    with pytest.raises(ConfigError) as e:
        build_config(heartbeat_timeout_s=heartbeat_s, recovery=knobs)
    says = "RECOVERY_TIMEOUT_S=5: a disconnect holds a node off the network for up to 15 s (3 x RECOVERY_TIMEOUT_S)"
    assert str(e.value).startswith(says) and "use RECOVERY_TIMEOUT_S <= 4" in str(e.value)
    assert "\n" not in str(e.value)


def test_outside_compose_a_disconnect_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("COMPOSE_SIM", raising=False)
    with pytest.raises(ConfigError, match=r"^RECOVERY: disconnect needs the compose cluster"):
        RecoverySettings(faults=("disconnect:1@2s",), ckpt_dir=str(tmp_path)).validate()


def test_the_ranks_of_one_round_agree_on_their_attempt_whatever_their_restart_count(tmp_path):
    plan = Plan(workdir=str(tmp_path), world=2, nnodes=2, rdzv_endpoint="node0:29400")
    first = {"MASTER_ADDR": "node0", "MASTER_PORT": "40001", "TORCHELASTIC_RESTART_COUNT": "1"}
    second = {**first, "MASTER_PORT": "40002", "TORCHELASTIC_RESTART_COUNT": "0"}  # restarted for the other node
    assert worker.job_attempt(plan, first) == 0
    assert worker.job_attempt(plan, second) == 1
    assert worker.job_attempt(plan, {**first, "TORCHELASTIC_RESTART_COUNT": "0"}) == 0  # its peer on the other node
    assert worker.job_attempt(Plan(workdir=str(tmp_path)), first) == 1  # one agent: its restart count


def test_a_node_connected_again_takes_its_new_interface(monkeypatch):
    monkeypatch.setattr(worker.socket, "if_nameindex", lambda: [(1, "lo"), (7, "eth1")])
    env = {"GLOO_SOCKET_IFNAME": "eth0"}
    worker.gloo_interface(env)
    assert env == {"GLOO_SOCKET_IFNAME": "eth1"}
    env = {"GLOO_SOCKET_IFNAME": "lo"}
    worker.gloo_interface(env)  # one that is there is kept
    assert env == {"GLOO_SOCKET_IFNAME": "lo"}


def _events(t0: float) -> list[dict]:
    ev = []
    for rank, host in ((0, "node0"), (1, "node1")):
        ev += [{"rank": rank, "attempt": 0, "host": host, "kind": "restore", "t": t0 + 1.0, "step": 0}]
        ev += [
            {"rank": rank, "attempt": 0, "host": host, "kind": "commit", "t": t0 + 1.0 + k / 10, "step": k}
            for k in (1, 2, 3)
        ]
        ev += [{"rank": rank, "attempt": 1, "host": host, "kind": "restore", "t": t0 + 9.0, "step": 2}]
    return ev


def test_the_hosts_truth_is_the_fault_its_records_score(tmp_path):
    t0 = 1000.0
    plan = Plan(workdir=str(tmp_path), nnodes=2, faults=(Fault(kind="disconnect", rank=1, step=0, at_s=1.2),))
    (tmp_path / "truth").mkdir()
    truth = {"node": 1, "at_s": 0.2, "stretch_s": 4.5, "t_disconnect": 0.25, "t_reconnect": 4.8, "struck": True}
    truth["t0"] = t0 + 1.0  # the host counts from the job's first step
    (tmp_path / "truth" / "disconnect0.json").write_text(json.dumps(truth))
    (f,) = measure.host_faults(plan.faults, tmp_path, _events(t0))
    assert (f["kind"], f["fault"], f["node"], f["rank"], f["attempt"]) == ("fault", "disconnect", 1, 1, 0)
    assert (f["t"], f["step"], f["struck"], f["stretch_s"]) == (t0 + 1.25, 2, "step", 4.5)
    (tmp_path / "truth" / "disconnect0.json").write_text(json.dumps({**truth, "struck": False}))
    assert measure.host_faults(plan.faults, tmp_path, _events(t0)) == []  # the job ended before it


def test_no_truth_or_a_failed_strike_fails_the_job(tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "TRUTH_WAIT_S", 0.1)
    plan = Plan(workdir=str(tmp_path), nnodes=2, faults=(Fault(kind="disconnect", rank=1, step=0, at_s=1.2),))
    with pytest.raises(elastic.RecoveryFailed, match="no truth of the disconnect"):
        measure.host_faults(plan.faults, tmp_path, [])
    (tmp_path / "truth").mkdir()
    (tmp_path / "truth" / "disconnect0.json").write_text(json.dumps({"struck": False, "error": "no node1"}))
    with pytest.raises(elastic.RecoveryFailed, match="host side failed: no node1"):
        measure.host_faults(plan.faults, tmp_path, [])


def test_the_runners_clock_strikes_no_disconnect(tmp_path):
    """A disconnect is the host's: the runner's wall-clock striker leaves it (it would wait for rank 1's process
    of an agent that has none, until the job ends)."""
    done = threading.Event()
    faults = (Fault(kind="disconnect", rank=1, step=0, at_s=0.01),)
    th = threading.Thread(target=wall.strike_all, args=(faults, 1, tmp_path, time.time(), done), daemon=True)
    th.start()
    th.join(2.0)
    alive = th.is_alive()
    done.set()
    assert not alive and not (tmp_path / "events" / "host.jsonl").exists()


def test_the_watcher_strikes_each_jobs_disconnects_and_writes_a_failed_strikes_truth(tmp_path):
    job = tmp_path / "recovery" / "run-1"
    job.mkdir(parents=True)
    plan = Plan(workdir=str(job), nnodes=2, seed=4, timeout_s=2.0)
    faults = (Fault(kind="disconnect", rank=1, step=0, at_s=0.1), Fault(kind="disconnect", rank=0, step=0, at_s=9))
    (job / "plan.json").write_text(json.dumps(Plan(**{**plan.__dict__, "faults": faults}).to_json()))
    cuts = disconnect.job_disconnects(json.loads((job / "plan.json").read_text()), 2)
    assert [(d.node, d.at_s) for d in cuts] == [(1, 0.1), (0, 9.0)] and cuts[0].stretch_s != cuts[1].stretch_s
    assert all(3.0 <= d.stretch_s <= 6.0 for d in cuts)  # 1.5 to 3 times the job's 2 s timeout
    (job / "job.json").write_text(json.dumps({"t0": time.time()}))
    (job / "events").mkdir()
    (job / "events" / "rank0.jsonl").write_text(json.dumps({"kind": "commit", "t": 5.0, "step": 1}) + "\n")
    stop = threading.Event()
    th = threading.Thread(target=disconnect.watch, args=(tmp_path, "", 2, stop.is_set, 0.01))
    th.start()
    deadline = time.time() + 10
    while len(list((job / "truth").glob("disconnect*.json"))) < 2 and time.time() < deadline:
        time.sleep(0.02)
    stop.set()
    th.join(10)
    truths = [json.loads((job / "truth" / f"disconnect{i}.json").read_text()) for i in (0, 1)]
    # no compose project here: each strike fails in one line, which the job's scoring reports
    assert [t["error"] for t in truths] == [
        "a disconnect fault needs the compose cluster: no compose project given"
    ] * 2
    assert not any(t["struck"] for t in truths) and [t["t0"] for t in truths] == [5.0, 5.0]  # from its first step


FAKE = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "{log}"
[ "$(basename "$0")" = docker ] && exit 1
exit 0
"""


@pytest.mark.parametrize(("experiments", "watched"), [("ddp,recovery", True), ("all", False)])
def test_compose_run_watches_disconnects_only_where_the_run_has_the_recovery_experiment(tmp_path, experiments, watched):
    """docker/compose-run.sh as it runs, with stand-ins for compose, docker and python that log their calls (no
    container starts): the host's disconnect watcher starts where EXPERIMENTS names recovery and RECOVERY_FAULTS
    a disconnect, and nowhere else (it was started whatever the run's experiments)."""
    import os
    import subprocess

    from tests.conftest import ROOT

    log = tmp_path / "calls.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("compose", "docker", "python"):
        (bin_dir / name).write_text(FAKE.format(log=log))
        (bin_dir / name).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "COMPOSE": str(bin_dir / "compose"),
        "PY": str(bin_dir / "python"),
        "NNODES": "2",
        "RESULTS_DIR": str(tmp_path / "results"),
        "RUN_ID": "r1",
        "EXPERIMENTS": experiments,
        "RECOVERY_FAULTS": "disconnect:1@2s",
        "COMPOSE_PROJECT_NAME": "p",
    }
    env.pop("RECOVERY_DIR", None)
    subprocess.run(["bash", str(ROOT / "docker" / "compose-run.sh")], env=env, capture_output=True, timeout=60)
    calls = log.read_text().splitlines()
    assert any(c.startswith("compose ") and " up " in c for c in calls)  # it ran the nodes
    watcher = [c for c in calls if c.startswith("python ")]
    want = [f"python -m experiments.recovery.disconnect p 2 --watch {tmp_path}/results/r1/recovery"]
    assert watcher == (want if watched else [])
