"""BACKEND=mpi on the host: preflight's one line when a wheel is missing (before any rank starts), and the
variables a rank started by mpiexec takes from MPI's launcher."""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from suite.common import node_env, rank_exits
from suite.harness.mpi.rank import launch_env, slurm_tasks_on_node
from suite.launch import mpi
from suite.common.failures import EXIT_PREFLIGHT
from tests.conftest import ROOT

ONE_NODE = {"nnodes": 1, "nproc": 2}


def test_missing_mpi4py_is_one_line_before_any_rank(tmp_path):
    (tmp_path / "mpi4py.py").write_text("raise ImportError('No module named mpi4py')\n")  # the wheel absent
    cmd = [sys.executable, "-m", "suite.launch", "--backend", "mpi", "--device", "cpu", "--nproc", "2"]
    cmd += ["--experiments", "collectives", "--results-root", str(tmp_path / "results")]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == EXIT_PREFLIGHT, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "BACKEND=mpi needs the mpi4py and mpich wheels" in lines[0], proc.stderr
    assert not (tmp_path / "results").exists()  # nothing started


def test_missing_mpiexec_names_where_it_looked(tmp_path):
    why = mpi.problem(ONE_NODE, python=str(tmp_path / "python"))
    assert why is not None and f"mpiexec, but there is none at {tmp_path / 'mpiexec'}" in why
    assert mpi.problem(ONE_NODE) is None  # this environment's own mpiexec and mpi4py


def test_mpi_runs_across_nodes_inside_slurm_or_over_ssh_to_the_named_hosts(monkeypatch):
    two = {**ONE_NODE, "nnodes": 2, "world_size": 4, "master_addr": "node0"}
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    for hosts in ("", "node0", "node0,node1,node2"):  # outside Slurm: one host a node, node 0's first
        why = mpi.problem(two, env={"MPI_HOSTS": hosts}) or ""
        assert f"MPI_HOSTS must name the 2 nodes' hosts in NODE_RANK order, comma-separated (got {hosts!r})" in why
    assert mpi.problem(two, env={"MPI_HOSTS": "node0, node1"}) is None
    cmd = mpi.command(two, ["-m", "pytest"], env={"MPI_HOSTS": "node0,node1"})
    assert cmd[:9] == [str(mpi.mpiexec_path()), "-launcher", "ssh", "-hosts", "node0,node1", "-ppn", "2", "-n", "4"]
    monkeypatch.setattr(mpi.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert mpi.problem(two, env={"SLURM_JOB_ID": "7"}) is None
    monkeypatch.setattr(mpi.shutil, "which", lambda name: None)
    assert "srun is not on PATH" in (mpi.problem(two, env={"SLURM_JOB_ID": "7"}) or "")
    argv = ["-m", "pytest", "-q"]
    assert mpi.command({**ONE_NODE, "world_size": 2}, argv, env={})[:3] == [str(mpi.mpiexec_path()), "-n", "2"]
    cmd = mpi.command(two, argv, env={"SLURM_JOB_ID": "7"})
    assert cmd[:3] == ["srun", "--mpi=pmi2", "--ntasks=4"] and "--kill-on-bad-exit=1" in cmd
    assert "--nodes=2" in cmd and "--ntasks-per-node=2" in cmd
    assert cmd[cmd.index(sys.executable) :] == [sys.executable, "-m", "suite.harness.mpi.rank", *argv]


def test_rank_variables_under_srun_take_the_ranks_on_each_node_from_slurm():
    pmi2 = {"PMI_RANK": "5", "PMI_SIZE": "7", "SLURM_LOCALID": "1", "SLURM_NODEID": "1"}
    got = launch_env({**pmi2, "SLURM_STEP_TASKS_PER_NODE": "4,3"})
    assert got == {"RANK": "5", "WORLD_SIZE": "7", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "3"}
    assert slurm_tasks_on_node({"SLURM_TASKS_PER_NODE": "3(x2),1", "SLURM_NODEID": "1"}) == 3
    assert slurm_tasks_on_node({"SLURM_TASKS_PER_NODE": "3(x2),1", "SLURM_NODEID": "2"}) == 1
    assert slurm_tasks_on_node({}) == 1


def test_rank_variables_from_mpich_and_open_mpi():
    hydra = {"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4"}
    want = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    assert launch_env(hydra) == want
    ompi = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"}
    ompi |= {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    assert launch_env(ompi) == want
    assert launch_env({"RANK": "0"}) == {}


def test_a_rank_srun_started_reads_its_nodes_task_count_as_mpi_rank_does():
    """init_distributed's reading of an srun-started rank and mpi_rank's agree: one count per node in node order
    (a step of 4 then 3 tasks), this node's by SLURM_NODEID."""
    from suite.harness.dist import read_launch_env

    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "7", "SLURM_LOCALID": "1", "SLURM_NODEID": "1"}
    env["SLURM_STEP_TASKS_PER_NODE"] = "4,3"
    le = read_launch_env(env)
    assert (le.rank, le.local_rank, le.local_world_size) == (5, 1, 3) == (5, 1, slurm_tasks_on_node(env))


@pytest.mark.parametrize(
    "code, status, exitcode, sig",
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL, -9, "SIGKILL"),
        ("import os; os.abort()", -signal.SIGABRT, -6, "SIGABRT"),
        ("import sys; sys.exit(3)", 3, 3, None),
    ],
)
def test_a_rank_mpiexec_started_ends_as_its_process_did_and_records_how(tmp_path, code, status, exitcode, sig):
    """mpiexec's hydra names neither the rank that failed first nor how it ended (its clean-up kills the others,
    then its block names whichever process it lists first): mpi_rank, the parent of the rank's process, ends the
    way that process did, as mpiexec and srun must see it, and leaves the launcher the record torchrun's "Root
    Cause" block is."""
    env = {**os.environ, "PMI_RANK": "1", "PMI_SIZE": "2"}
    cmd = [sys.executable, "-m", "suite.harness.mpi.rank", "-c", code, "--results-dir", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == status, proc.stderr
    first = rank_exits.first(tmp_path)
    assert first == {"rank": 1, "host": socket.gethostname(), "exitcode": exitcode, "signal": sig}


def test_a_rank_that_ends_with_status_0_leaves_no_record(tmp_path):
    env = {**os.environ, "PMI_RANK": "0", "PMI_SIZE": "2"}
    cmd = [sys.executable, "-m", "suite.harness.mpi.rank", "-c", "pass", "--results-dir", str(tmp_path)]
    assert subprocess.run(cmd, cwd=ROOT, env=env, timeout=60).returncode == 0
    assert rank_exits.first(tmp_path) is None and not (tmp_path / "hang").exists()


def test_the_first_rank_to_end_is_the_earliest_record_and_a_torn_one_is_skipped(tmp_path):
    """After the first rank died, mpiexec or the launcher end the others: their records come later."""
    rank_exits.record(tmp_path, 2, "node1", 9, when=20.0)  # ended by the clean-up after rank 0
    rank_exits.record(tmp_path, 0, "node0", 3 << 8, when=10.0)  # exited with status 3 first
    (tmp_path / "hang" / "rank1.exit").write_text("{")  # cut short
    assert rank_exits.first(tmp_path) == {"rank": 0, "host": "node0", "exitcode": 3, "signal": None}
    assert json.loads((tmp_path / "hang" / "rank2.exit").read_text())["signal"] == "SIGKILL"


def test_each_nodes_ranks_get_its_own_node_rank_and_link_profile_not_node_0s(tmp_path, monkeypatch):
    """Across hosts node 0's mpiexec passes node 0's environment to every rank: node 0 names the file, a follower
    writes its own variables there (here the same host, so the follower's write is what a rank there reads), and
    a rank puts them in place of node 0's: NODE_RANK and the link profile, nothing else."""
    import tempfile
    import threading

    import torch.distributed as dist

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    lay = {"master_addr": "127.0.0.1", "master_port": store.port, "rdzv_timeout_s": 20, "nnodes": 2}
    monkeypatch.setenv("LINK_RATE_NODE", "200mbit")
    monkeypatch.setenv("LINK_QDISC", "qdisc tbf 8001: root rate 200Mbit")
    ranks_env: dict = {}
    mpi.share_node_env(store, ranks_env, {**lay, "node_rank": 0})
    path = ranks_env[node_env.VARIABLE]
    assert json.loads(open(path).read())["NODE_RANK"] == "0"

    monkeypatch.setenv("LINK_RATE_NODE", "50mbit")  # the follower's node: another rate, no qdisc line
    monkeypatch.delenv("LINK_QDISC")
    got = []
    follower = threading.Thread(target=lambda: got.append(mpi.follow({**lay, "node_rank": 1})))
    follower.start()
    mpi.await_followers(store, lay)
    rank = {"NODE_RANK": "0", "LINK_RATE_NODE": "200mbit", "LINK_QDISC": "qdisc tbf", "RANK": "3", **ranks_env}
    assert node_env.put_in_place(rank)
    assert {k: v for k, v in rank.items() if k != node_env.VARIABLE} == {
        "NODE_RANK": "1",
        "LINK_RATE_NODE": "50mbit",
        "RANK": "3",
    }
    mpi.release_followers(store, lay, 0)
    follower.join(timeout=20)
    assert got == [0]
    assert not node_env.put_in_place({"NODE_RANK": "0"})  # one host: nothing named, nothing changed
