"""MPI: the suite's own c10d group over mpi4py (suite/harness/mpi/group.py), CPU tensors, ranks started by
mpiexec (suite/launch/mpi.py)."""

from __future__ import annotations

from suite.common.backends.record import MPIEXEC, Backend


def available() -> bool:
    """torch's own MPI, else the suite's over mpi4py."""
    import importlib.util

    import torch.distributed as dist

    return dist.is_mpi_available() or importlib.util.find_spec("mpi4py") is not None


def version() -> bool:
    """Whether torch itself was built with MPI (the machine info's ``mpi``)."""
    import torch.distributed as dist

    return dist.is_mpi_available()


BACKEND = Backend(
    name="mpi",
    order=3,
    lane_order=3,
    label="MPI",
    devices=("cpu",),
    available=available,
    version=version,
    c10d="suite.harness.mpi.group:register",
    launcher=MPIEXEC,
    launch_problem="suite.launch.mpi:problem",
    cannot={
        "functional_collectives": "DTensor's functional collectives dispatch in C++ to a backend registered for the "
        "device and cannot reach the suite's Python process group",
    },
    bare_lane="mpi4py-numpy",
)
