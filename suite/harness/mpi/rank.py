"""A rank started by ``mpiexec`` (``BACKEND=mpi``): the variables torchrun would have set, read from MPI's
launcher, then the rank's own command in a child process (``os.execv`` after ``fork``: the MPI launcher's
connection, inherited, stays open for ``MPI_Init``)::

    mpiexec -n 4 python -m suite.harness.mpi.rank -m pytest -p suite.harness.pytest.plugin ...

This process stays the rank's parent, as torchrun's agent is: it passes on the signals mpiexec or srun sends
(SIGINT, SIGTERM), the child dies with it (a clean-up that kills this process ends the rank too), and when the
rank ends other than with status 0, and not on a signal passed on, it records how (an exit status, or the signal
that killed it) for the launcher (suite/common/rank_exits.py), then ends the same way, so that mpiexec and srun
see what they would have seen of the rank itself.

MPICH's hydra sets PMI_RANK, PMI_SIZE, MPI_LOCALRANKID and MPI_LOCALNRANKS; Open MPI sets OMPI_COMM_WORLD_*; under
Slurm (``srun --mpi=pmi2``, suite/launch/mpi.py) PMI gives PMI_RANK and PMI_SIZE, Slurm the ranks on each node.
The rendezvous store (MASTER_ADDR, MASTER_PORT) is the launcher's (suite/launch/mpi.py), as torchrun's is.
Across hosts, the variables of the node a rank runs on (NODE_RANK, its link profile) replace node 0's, which
mpiexec passed on (suite/common/node_env.py).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import socket
import sys

from suite.common import node_env, rank_exits

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


PASSED_ON = (signal.SIGINT, signal.SIGTERM)
"""What mpiexec (hydra forwards Ctrl-C and SIGTERM to every rank) and srun send a rank to stop it."""
PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    found = launch_env(os.environ)
    if not found:
        sys.exit("error: suite.harness.mpi.rank runs under mpiexec (no MPI launcher variables in the environment)")
    os.environ.update(found)
    node_env.put_in_place(os.environ)  # across hosts: this node's NODE_RANK and link profile, not node 0's
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        _die_with(parent)
        os.execv(sys.executable, [sys.executable, *argv])
    passed: list[int] = []

    def pass_on(signum, _frame):
        passed.append(signum)
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for s in PASSED_ON:
        signal.signal(s, pass_on)
    _, status = os.waitpid(child, 0)  # retried across the signals passed on (PEP 475)
    run_dir = _results_dir(argv)
    if status != 0 and run_dir is not None and not passed:
        rank_exits.record(run_dir, int(found["RANK"]), socket.gethostname(), status)
    _end_as(status)


def _die_with(parent: int) -> None:
    """In the child: be killed when this parent dies (Linux's parent-death signal; kept across execv)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl: the launcher still ends every process of the run
        return
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _results_dir(argv: list[str]) -> str | None:
    """The run directory the rank's pytest session writes to (its ``--results-dir``), None without one."""
    i = argv.index("--results-dir") if "--results-dir" in argv else -1
    return argv[i + 1] if 0 <= i < len(argv) - 1 else None


def _end_as(status: int) -> None:
    """End this process as the rank ended: the same exit status, or the same signal (without a core dump)."""
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        os._exit(code)
    if -code != signal.SIGKILL:  # the only one that has no handler to reset
        signal.signal(-code, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), -code)
    os._exit(128 - code)  # a signal whose default is not to end the process


if __name__ == "__main__":
    main(sys.argv[1:])
