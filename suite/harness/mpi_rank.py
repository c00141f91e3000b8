"""A rank started by ``mpiexec`` (``BACKEND=mpi``): the variables torchrun would have set, read from MPI's
launcher, then the rank's own command in this same process (``os.execv``: the MPI launcher's connection,
inherited, stays open for ``MPI_Init``)::

    mpiexec -n 4 python -m suite.harness.mpi_rank -m pytest -p suite.harness.plugin ...

MPICH's hydra sets PMI_RANK, PMI_SIZE, MPI_LOCALRANKID and MPI_LOCALNRANKS; Open MPI sets OMPI_COMM_WORLD_*.
The rendezvous store (MASTER_ADDR, MASTER_PORT) is the launcher's (suite/launch/mpi.py), as torchrun's is.
"""

from __future__ import annotations

import os
import sys

_FROM = (
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),  # MPICH (hydra)
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
)
_TO = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


def launch_env(env) -> dict[str, str]:
    """RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from the MPI launcher's variables in ``env`` (empty when
    no MPI launcher started this process)."""
    for names in _FROM:
        if names[0] in env and names[1] in env:
            return {to: env[name] for to, name in zip(_TO, names) if name in env}
    return {}


def main(argv: list[str]) -> None:
    found = launch_env(os.environ)
    if not found:
        sys.exit("error: suite.harness.mpi_rank runs under mpiexec (no MPI launcher variables in the environment)")
    os.environ.update(found)
    os.execv(sys.executable, [sys.executable, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
