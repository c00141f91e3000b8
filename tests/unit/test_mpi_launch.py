"""BACKEND=mpi on the host: preflight's one line when a wheel is missing (before any rank starts), and the
variables a rank started by mpiexec takes from MPI's launcher."""

import os
import subprocess
import sys

from suite.harness.mpi_rank import launch_env
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


def test_mpi_runs_on_one_node():
    assert "one node" in (mpi.problem({**ONE_NODE, "nnodes": 2}) or "")


def test_rank_variables_from_mpich_and_open_mpi():
    hydra = {"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4"}
    want = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    assert launch_env(hydra) == want
    ompi = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"}
    ompi |= {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
    assert launch_env(ompi) == want
    assert launch_env({"RANK": "0"}) == {}
