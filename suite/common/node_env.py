"""A node's own variables, for the ranks that an MPI launcher on another node starts on it.

Under torchrun each node's ranks inherit their own launcher's environment: NODE_RANK, and the link profile that
the node's entry point applied (LINK_RATE_NODE, LINK_QDISC, LINK_RATE_APPLIED, ...: docker/link.sh), which the
results record per host (suite/system/sysinfo.py) and the doctor and the reports read. With ``BACKEND=mpi`` across
the compose nodes, node 0's mpiexec starts every node's ranks over ssh with node 0's environment. So node 0 names
a file (``NODE_ENV_FILE``, passed to every rank), each node's launcher writes its own variables there on its
own host before node 0 starts the ranks (suite/launch/mpi.py), and each rank puts them in place of node 0's
(suite/harness/mpi/rank.py).
"""

from __future__ import annotations

import json
import os
import tempfile

from suite.common.fileio import write_json_atomic

VARIABLE = "NODE_ENV_FILE"
"""The file (the same path on every host) holding the variables of the host it is on."""
OWN_PREFIXES = ("LINK_",)
"""The variables besides NODE_RANK that each node sets for itself (its link profile)."""


def own(env, node_rank: int) -> dict[str, str]:
    """The variables of ``env`` that belong to its node, with NODE_RANK ``node_rank``."""
    return {k: v for k, v in env.items() if k.startswith(OWN_PREFIXES)} | {"NODE_RANK": str(node_rank)}


def write(path: str, env, node_rank: int) -> None:
    """This node's variables (``own``) to ``path`` on this host, atomically; ResultsWriteError naming it."""
    write_json_atomic(path, own(env, node_rank))


def put_in_place(environ) -> bool:
    """Replace the node variables in ``environ`` (a rank's, as mpiexec passed node 0's) with those in the file
    that ``environ[VARIABLE]`` names on this host; False (``environ`` unchanged) where none is named or it cannot
    be read."""
    path = environ.get(VARIABLE)
    if not path:
        return False
    try:
        with open(path) as fh:
            found = json.load(fh)
    except (OSError, ValueError):
        return False
    for k in [k for k in environ if k.startswith(OWN_PREFIXES)]:
        del environ[k]
    environ.update({str(k): str(v) for k, v in found.items()})
    return True


def path_for(port: int) -> str:
    """The file's path for the run whose store listens on ``port`` (one run per port at a time on a host)."""
    return os.path.join(tempfile.gettempdir(), f"suite-mpi-node-env-{port}.json")
