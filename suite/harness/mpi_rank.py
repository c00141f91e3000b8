"""A rank started by ``mpiexec`` (``BACKEND=mpi``): the variables torchrun would have set, read from MPI's
launcher, then the rank's own command in this same process (``os.execv``: the MPI launcher's connection,
inherited, stays open for ``MPI_Init``)::

    mpiexec -n 4 python -m suite.harness.mpi_rank -m pytest -p suite.harness.plugin ...

MPICH's hydra sets PMI_RANK, PMI_SIZE, MPI_LOCALRANKID and MPI_LOCALNRANKS; Open MPI sets OMPI_COMM_WORLD_*; under
Slurm (``srun --mpi=pmi2``, suite/launch/mpi.py) PMI gives PMI_RANK and PMI_SIZE, Slurm the ranks on each node.
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
    no MPI launcher started this process). Under ``srun --mpi=pmi2`` MPICH's PMI gives the rank and the world
    only; the ranks on this node are Slurm's."""
    for names in _FROM:
        if names[0] in env and names[1] in env:
            found = {to: env[name] for to, name in zip(_TO, names) if name in env}
            if "LOCAL_RANK" not in found and "SLURM_LOCALID" in env:
                found["LOCAL_RANK"] = env["SLURM_LOCALID"]
                found["LOCAL_WORLD_SIZE"] = str(slurm_tasks_on_node(env))
            return found
    return {}


def slurm_tasks_on_node(env) -> int:
    """The tasks of this job step on this node: SLURM_STEP_TASKS_PER_NODE (or SLURM_NTASKS_PER_NODE, or
    SLURM_TASKS_PER_NODE) is one count per node in node order, ``3(x2),1`` for 3, 3 and 1; SLURM_NODEID is this
    node's place in it. Shared with init_distributed's reading of an srun-started rank (suite/harness/dist.py)."""
    names = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
    spec = next((env[n] for n in names if env.get(n)), "1")
    counts: list[int] = []
    for part in spec.split(","):
        n, _, times = part.partition("(x")
        counts += [int(n)] * int(times.rstrip(")") or 1)
    node = int(env.get("SLURM_NODEID", "0"))
    return counts[node] if node < len(counts) else counts[-1]


def main(argv: list[str]) -> None:
    found = launch_env(os.environ)
    if not found:
        sys.exit("error: suite.harness.mpi_rank runs under mpiexec (no MPI launcher variables in the environment)")
    os.environ.update(found)
    os.execv(sys.executable, [sys.executable, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
