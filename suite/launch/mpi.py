"""``BACKEND=mpi`` on the host: its preflight, and the ranks started by ``mpiexec`` instead of torchrun.

Processes torchrun starts cannot join one MPI world, so the launcher starts the ranks with the ``mpiexec``
next to its own Python (the MPICH wheel puts it in the virtual environment's bin), each rank running
suite/harness/mpi_rank.py, which sets torchrun's variables from MPI's and runs the same pytest session as
under torchrun. The launcher itself hosts the rendezvous store, as torchrun's agent does
(``TORCHELASTIC_USE_AGENT_STORE``: every rank is its client), so the heartbeat and the end-of-run
handshake outlive any one rank.

Inside a Slurm allocation (SLURM_JOB_ID set: ``sbatch scripts/slurm/suite.sbatch`` with BACKEND=mpi, or
``salloc``) the ranks are started by ``srun --mpi=pmi2`` instead, on one node or across the allocation's nodes:
MPICH's PMI client speaks Slurm's PMI-2, and hydra's mpiexec cannot start inside a job step (it waits on an srun
of its own). The store is then hosted on MASTER_ADDR, the node the launcher runs on, for the ranks of every node.
Outside Slurm, one node only: across hosts hydra would need ssh between them.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path


def mpiexec_path(python: str | None = None) -> Path:
    """The ``mpiexec`` beside ``python`` (default: this interpreter)."""
    return Path(python or sys.executable).parent / "mpiexec"


def problem(lay: dict, python: str | None = None, env=None) -> str | None:
    """Why this host cannot start MPI ranks, in one line (preflight raises it): mpi4py or mpiexec is missing, or
    the run spans several nodes outside Slurm; None when it can."""
    try:
        importlib.import_module("mpi4py")  # the package only: MPI itself starts on the ranks
    except ImportError as e:
        return (
            f"BACKEND=mpi needs the mpi4py and mpich wheels (requirements.txt), but mpi4py does not import ({e}); "
            "pip install -r requirements.txt"
        )
    where = mpiexec_path(python)
    if not where.is_file():
        return (
            f"BACKEND=mpi starts the ranks with mpiexec, but there is none at {where} "
            "(the mpich wheel of requirements.txt installs it); pip install -r requirements.txt"
        )
    if lay["nnodes"] > 1 and not in_slurm(env):
        return (
            "BACKEND=mpi runs across nodes inside a Slurm allocation (sbatch scripts/slurm/suite.sbatch, srun "
            "--mpi=pmi2 starts the ranks); elsewhere on one node (NNODES=1)"
        )
    if in_slurm(env) and shutil.which("srun") is None:
        return "BACKEND=mpi inside a Slurm allocation starts the ranks with srun, but srun is not on PATH"
    return None


def in_slurm(env=None) -> bool:
    """Whether this process runs inside a Slurm allocation (its ranks then start with srun)."""
    return "SLURM_JOB_ID" in (os.environ if env is None else env)


def command(lay: dict, rank_argv: list[str], env=None) -> list[str]:
    """What starts the run's ranks, each running ``python <rank_argv>`` through mpi_rank: ``mpiexec`` with
    ``lay["nproc"]`` ranks, or inside a Slurm allocation ``srun`` with ``lay["world_size"]``, ``nproc`` a node.
    ``--overlap``: the launcher may itself run in a step (``srun python -m suite.launch``); ``--overcommit`` and
    no CPU binding: the ranks share the node's CPUs as under torchrun (the record says when they outnumber them)."""
    rank = [sys.executable, "-m", "suite.harness.mpi_rank", *rank_argv]
    if not in_slurm(env):
        return [str(mpiexec_path()), "-n", str(lay["nproc"]), *rank]
    srun = ["srun", "--mpi=pmi2", f"--ntasks={lay['world_size']}", "--kill-on-bad-exit=1", "--overlap"]
    srun += ["--overcommit", "--cpu-bind=none"]
    if lay["nnodes"] > 1:
        srun += [f"--nodes={lay['nnodes']}", f"--ntasks-per-node={lay['nproc']}"]
    return srun + rank


def host_store(env: dict, lay: dict):
    """The run's rendezvous store, hosted by this process on a free port for the ranks (``env`` gets its address:
    loopback on one node, MASTER_ADDR, this node, across nodes); keep the returned store alive until the ranks have
    ended."""
    import datetime

    import torch.distributed as dist

    addr = lay["master_addr"] if lay["nnodes"] > 1 else "127.0.0.1"
    store = dist.TCPStore(addr, 0, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
    env.update(MASTER_ADDR=addr, MASTER_PORT=str(store.port), TORCHELASTIC_USE_AGENT_STORE="True")
    return store
