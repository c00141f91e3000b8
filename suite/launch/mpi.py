"""``BACKEND=mpi`` on the host: its preflight, and the ranks started by ``mpiexec`` instead of torchrun.

Processes torchrun starts cannot join one MPI world, so the launcher starts the ranks with the ``mpiexec``
next to its own Python (the MPICH wheel puts it in the virtual environment's bin), each rank running
suite/harness/mpi/rank.py, which sets torchrun's variables from MPI's and runs the same pytest session as
under torchrun. The launcher itself hosts the rendezvous store, as torchrun's agent does
(``TORCHELASTIC_USE_AGENT_STORE``: every rank is its client), so the heartbeat and the end-of-run
handshake outlive any one rank.

Inside a Slurm allocation (SLURM_JOB_ID set: ``sbatch scripts/slurm/suite.sbatch`` with BACKEND=mpi, or
``salloc``) the ranks are started by ``srun --mpi=pmi2`` instead, on one node or across the allocation's nodes:
MPICH's PMI client speaks Slurm's PMI-2, and hydra's mpiexec cannot start inside a job step (it waits on an srun
of its own). The store is then hosted on MASTER_ADDR, the node the launcher runs on, for the ranks of every node.

Across nodes outside Slurm (the compose simulation, hosts with sshd), every node runs the launcher as under
torchrun, but only node 0's starts ranks: ``mpiexec -launcher ssh -hosts <MPI_HOSTS>`` starts hydra's proxy on
every host over ssh, as real clusters run MPI in containers (the Kubeflow MPI operator). The other nodes' launchers
follow: they join node 0's store (MASTER_ADDR:MASTER_PORT) once this host can take ssh logins, node 0 starts the
ranks when every node has joined, and each follower ends with node 0's exit status when its run ends, or with
status 5 when node 0's launcher is lost.
"""

from __future__ import annotations

import datetime
import importlib
import os
import shutil
import sys
import time
from pathlib import Path

from suite.common import node_env
from suite.common.failures import EXIT_PEER_FAILURE, EXIT_RENDEZVOUS


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
    if across_hosts(lay, env):
        hosts = mpi_hosts(env)
        if len(hosts) != lay["nnodes"]:
            return (
                f"BACKEND=mpi across {lay['nnodes']} nodes outside Slurm starts every rank from node 0 with mpiexec "
                f"over ssh: MPI_HOSTS must name the {lay['nnodes']} nodes' hosts in NODE_RANK order, comma-separated "
                f"(got {os.environ.get('MPI_HOSTS', '') if env is None else env.get('MPI_HOSTS', '')!r}); "
                "the compose simulation sets it, or run inside a Slurm allocation (sbatch scripts/slurm/suite.sbatch)"
            )
    if in_slurm(env) and shutil.which("srun") is None:
        return "BACKEND=mpi inside a Slurm allocation starts the ranks with srun, but srun is not on PATH"
    return None


def in_slurm(env=None) -> bool:
    """Whether this process runs inside a Slurm allocation (its ranks then start with srun)."""
    return "SLURM_JOB_ID" in (os.environ if env is None else env)


def across_hosts(lay: dict, env=None) -> bool:
    """Whether node 0's mpiexec starts the ranks of every node over ssh (several nodes, no Slurm)."""
    return lay["nnodes"] > 1 and not in_slurm(env)


def mpi_hosts(env=None) -> list[str]:
    """MPI_HOSTS: the nodes' hosts in NODE_RANK order (``node0,node1``)."""
    value = (os.environ if env is None else env).get("MPI_HOSTS", "")
    return [h.strip() for h in value.split(",") if h.strip()]


def command(lay: dict, rank_argv: list[str], env=None) -> list[str]:
    """What starts the run's ranks, each running ``python <rank_argv>`` through mpi_rank: ``mpiexec`` with
    ``lay["nproc"]`` ranks, or inside a Slurm allocation ``srun`` with ``lay["world_size"]``, ``nproc`` a node.
    ``--overlap``: the launcher may itself run in a step (``srun python -m suite.launch``); ``--overcommit`` and
    no CPU binding: the ranks share the node's CPUs as under torchrun (the record says when they outnumber them)."""
    rank = [sys.executable, "-m", "suite.harness.mpi.rank", *rank_argv]
    if across_hosts(lay, env):  # hydra's proxies over ssh, nproc ranks on each host in node order
        hosts = ["-launcher", "ssh", "-hosts", ",".join(mpi_hosts(env)), "-ppn", str(lay["nproc"])]
        return [str(mpiexec_path()), *hosts, "-n", str(lay["world_size"]), *rank]
    if not in_slurm(env):
        return [str(mpiexec_path()), "-n", str(lay["nproc"]), *rank]
    srun = ["srun", "--mpi=pmi2", f"--ntasks={lay['world_size']}", "--kill-on-bad-exit=1", "--overlap"]
    srun += ["--overcommit", "--cpu-bind=none"]
    if lay["nnodes"] > 1:
        srun += [f"--nodes={lay['nnodes']}", f"--ntasks-per-node={lay['nproc']}"]
    return srun + rank


def host_store(env: dict, lay: dict):
    """The run's rendezvous store, hosted by this process on a free port for the ranks (``env`` gets its address:
    loopback on one node, MASTER_ADDR, this node, across nodes; MASTER_PORT across hosts, where the other nodes'
    launchers join it); keep the returned store alive until the ranks have ended."""
    import torch.distributed as dist

    addr = lay["master_addr"] if lay["nnodes"] > 1 else "127.0.0.1"
    port = lay["master_port"] if across_hosts(lay, env) else 0
    store = dist.TCPStore(addr, port, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
    env.update(MASTER_ADDR=addr, MASTER_PORT=str(store.port), TORCHELASTIC_USE_AGENT_STORE="True")
    return store


JOINED, STATUS, LEFT = "suite_mpi/joined", "suite_mpi/status", "suite_mpi/left"
"""Node 0's store keys: the followers that joined, node 0's exit status, the followers that read it."""
NODE_ENV = "suite_mpi/node_env"
"""Node 0's store key: the path where each node writes its own variables (suite/common/node_env.py)."""
POLL_S = 0.5


class NodesError(RuntimeError):
    """The other nodes did not join node 0 in time; nothing was started."""


def share_node_env(store, env: dict, lay: dict) -> None:
    """On node 0, before the followers join: name the file each node writes its own variables to, for the ranks
    (``env``: mpiexec's) and for the followers (the store), and write node 0's."""
    path = node_env.path_for(lay["master_port"])
    node_env.write(path, os.environ, 0)
    env[node_env.VARIABLE] = path
    store.set(NODE_ENV, path)


def await_followers(store, lay: dict) -> None:
    """On node 0: wait until every other node's launcher has joined the store (its host then takes ssh logins),
    at most the rendezvous timeout; NodesError naming how many are missing."""
    deadline = time.monotonic() + lay["rdzv_timeout_s"]
    want = lay["nnodes"] - 1
    while (joined := store.add(JOINED, 0)) < want:
        if time.monotonic() > deadline:
            waited = f"{lay['rdzv_timeout_s']:z.0f}"
            raise NodesError(
                f"{want - joined} of the {want} other node(s) did not join node 0 within {waited} s (each runs "
                f"python -m suite.launch with its NODE_RANK; hosts {','.join(mpi_hosts()[1:])})"
            )
        time.sleep(POLL_S)


def release_followers(store, lay: dict, status: int, wait_s: float = 5.0) -> None:
    """On node 0, once its run has ended: give the other nodes its exit status, and let them read it (at most
    ``wait_s``) before the store goes with this process."""
    try:
        store.set(STATUS, str(status))
        deadline = time.monotonic() + wait_s
        while store.add(LEFT, 0) < lay["nnodes"] - 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    except Exception:  # noqa: BLE001 - the followers then see the store end: status 5, never a hang
        pass


def follow(lay: dict) -> int:
    """On a node other than 0: join node 0's store, wait while node 0's mpiexec runs this node's ranks over ssh,
    and return node 0's exit status (5 when node 0's launcher is lost before it gave one)."""
    import torch.distributed as dist

    where = f"{lay['master_addr']}:{lay['master_port']}"
    timeout = datetime.timedelta(seconds=lay["rdzv_timeout_s"])
    try:
        store = dist.TCPStore(lay["master_addr"], lay["master_port"], is_master=False, timeout=timeout)
    except Exception as e:  # noqa: BLE001 - a store that never answers: one line, the rendezvous status
        print(f"error: node 0's launcher did not answer at {where} ({type(e).__name__}: {e})", file=sys.stderr)
        return EXIT_RENDEZVOUS
    print(f"# node {lay['node_rank']}: joined node 0 at {where}; its mpiexec starts this node's ranks over ssh")
    sys.stdout.flush()
    try:
        _write_node_env(store.get(NODE_ENV).decode(), lay["node_rank"])
        store.add(JOINED, 1)
        while not store.check([STATUS]):
            time.sleep(POLL_S)
        status = int(store.get(STATUS))
        store.add(LEFT, 1)
    except Exception as e:  # noqa: BLE001 - node 0 gone: this node's ranks (ssh-started) went with its mpiexec
        print(
            f"# node {lay['node_rank']}: lost node 0's launcher at {where} before it gave the run's status "
            f"({type(e).__name__}): a peer was lost",
            file=sys.stderr,
        )
        return EXIT_PEER_FAILURE
    print(f"# node {lay['node_rank']}: node 0's run ended with status {status}")
    return status


def _write_node_env(path: str, node_rank: int) -> None:
    """On a follower: this node's variables where node 0 said, for the ranks its mpiexec starts here; a line
    saying what the records will show where that fails (the run goes on: its measurements are unaffected)."""
    try:
        node_env.write(path, os.environ, node_rank)
    except OSError as e:
        print(f"# node {node_rank}: {e}; its ranks record node 0's NODE_RANK and link profile", file=sys.stderr)
