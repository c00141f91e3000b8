"""``BACKEND=mpi`` on the host: its preflight, and the ranks started by ``mpiexec`` instead of torchrun.

Processes torchrun starts cannot join one MPI world, so the launcher starts the ranks with the ``mpiexec``
next to its own Python (the MPICH wheel puts it in the virtual environment's bin), each rank running
suite/harness/mpi_rank.py, which sets torchrun's variables from MPI's and runs the same pytest session as
under torchrun. The launcher itself hosts the rendezvous store, as torchrun's agent does
(``TORCHELASTIC_USE_AGENT_STORE``: every rank is its client), so the heartbeat and the end-of-run
handshake outlive any one rank. One node only: across nodes the ranks would need hydra over ssh or
Slurm's PMI.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def mpiexec_path(python: str | None = None) -> Path:
    """The ``mpiexec`` beside ``python`` (default: this interpreter)."""
    return Path(python or sys.executable).parent / "mpiexec"


def problem(lay: dict, python: str | None = None) -> str | None:
    """Why this host cannot start MPI ranks, in one line (preflight raises it): mpi4py or mpiexec is missing, or
    the run spans several nodes; None when it can."""
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
    if lay["nnodes"] > 1:
        return "BACKEND=mpi runs on one node (NNODES=1): across nodes it needs hydra over ssh or Slurm"
    return None


def command(lay: dict, rank_argv: list[str]) -> list[str]:
    """``mpiexec`` starting ``lay["nproc"]`` ranks, each running ``python <rank_argv>`` through mpi_rank."""
    return [str(mpiexec_path()), "-n", str(lay["nproc"]), sys.executable, "-m", "suite.harness.mpi_rank", *rank_argv]


def host_store(env: dict):
    """The run's rendezvous store, hosted by this process on a free loopback port for the ranks (``env`` gets
    its address); keep the returned store alive until the ranks have ended."""
    import datetime

    import torch.distributed as dist

    store = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60)
    )
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port), TORCHELASTIC_USE_AGENT_STORE="True")
    return store
