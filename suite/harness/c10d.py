"""The one place the suite touches c10d's private API (checked with torch 2.13; each call falls back).

c10d counts the ops each rank issues on each process group (its per-group sequence number, what the
flight recorder and NCCL's watchdog print), names every group, and dumps its flight recorder; none of the
three is public. The op journal (suite/harness/journal/__init__.py) and the sharded experiment's inventory check
(through suite.api) read them here. Where this torch lacks one, the caller says so rather than guessing:
no sequence number (the journal counts its own ops instead), a group named by its id, no dump.
"""

from __future__ import annotations

import contextlib
import re
import time

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode


def _torch_version() -> tuple[int, int]:
    return tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2])  # type: ignore[return-value]


_SEQ_API = _torch_version() >= (2, 0)
"""torch 2.x has ``ProcessGroup._get_sequence_number_for_group`` (measured on 2.13)."""


def sequence_getter(group):
    """A callable giving c10d's count of the ops this rank issued on ``group``, or None where torch has none.

    Private API (``ProcessGroup._get_sequence_number_for_group``), used only here (suite/harness/c10d.py) and
    checked by version; without it the journal's own count stands in (``Journal.count``), which sees
    only the ops issued through ``torch.distributed``."""
    return getattr(group, "_get_sequence_number_for_group", None) if _SEQ_API else None


def sequence_number(group) -> int | None:
    """c10d's count of the ops this rank issued on ``group``, or None where torch does not say."""
    get = sequence_getter(group)
    if get is None:
        return None
    try:
        return int(get())
    except Exception:  # a destroyed or not-yet-initialised group
        return None


def group_name(group) -> str:
    """The group's c10d name ("0" for the default group), as the flight recorder names it."""
    if group is None or group is dist.group.WORLD:
        return "0"
    try:
        return dist.distributed_c10d._get_process_group_name(group)
    except Exception:
        return str(id(group))


def registered_name(group) -> str:
    """The name c10d registered ``group`` under (a Python process group has none of its own in C++)."""
    return dist.distributed_c10d._world.pg_names[group]


def completed_work(result=None):
    """A Work that is already complete (what a Python process group returns for an op it finished itself)."""
    fut = torch.futures.Future()
    fut.set_result(result)
    return work_from_future(fut)


def future_value(work):
    """The value of ``work``'s future (None where it has none)."""
    try:
        return work.get_future().value()
    except RuntimeError:
        return None


def work_from_future(fut):
    """A Work that completes when ``fut`` does, failed or not: its wait does not raise what ``fut`` raised (it
    returns True), so a caller that must see a failure keeps it itself (fault_mode._then does)."""
    return torch._C._distributed_c10d._create_work_from_future(fut)


def flight_recorder_dump() -> bytes | None:
    """This process's flight-recorder dump (torch's pickle, what NCCL writes on a timeout), without the
    entries' stack traces; None where this torch has no dump call."""
    fn = getattr(torch._C._distributed_c10d, "_dump_fr_trace", None)
    return None if fn is None else fn(includeStackTraces=False)


@contextlib.contextmanager
def p2p_calls():
    """Every send and recv issued in the block through a c10d ``ProcessGroup``'s own ``send`` / ``recv`` (what
    torch.distributed's send, recv, isend, irecv, batch_isend_irecv and send_object_list call), appended as it
    returns to the list the block gets: ``{"pg", "seq", "op", "src", "dst", "issued_ns"}``, the group's name, its
    c10d sequence number after the op (the count the flight recorder's entries carry as ``op_id``, which counts p2p
    ops too), "send" or "recv", the sender's and the receiver's global ranks, and when the call began (Unix ns).

    Why: Gloo's flight recorder keeps no entry of a point-to-point op (torch 2.13: its entries skip the op ids of
    the group's sends and recvs), so nothing else names a p2p op's group and peers. A recv from any source, and a
    group whose Python class overrides the methods (suite/harness/plant), is not seen. The wrapper costs a few
    microseconds per op (a dict lookup, a counter read, a list append)."""
    pg_class = dist.ProcessGroup
    calls: list[dict] = []
    from suite import op_table

    # the blocking send and recv (the op table's): a ProcessGroup's own methods of those names issue every p2p op
    names = [op.name for op in op_table.OPS if op.family == "send_recv" and not op.issues and not op.objects]
    # the class's own attributes (pybind11's instancemethod descriptors), put back as they were: the function
    # getattr gives is not a descriptor, and set back on the class it would leave every later pg.send unbound
    originals = {name: vars(pg_class).get(name) for name in names}
    if any(fn is None for fn in originals.values()):
        yield calls
        return
    me = dist.get_rank() if dist.is_initialized() else 0

    def wrapped(op: str, fn):
        def call(pg, tensors, peer, *args, **kwargs):
            issued = time.time_ns()
            work = fn(pg, tensors, peer, *args, **kwargs)
            try:
                other = dist.get_global_rank(pg, peer) if pg is not dist.distributed_c10d._get_default_group() else peer
                seq = sequence_number(pg)
                src, dst = (me, int(other)) if op == "send" else (int(other), me)
                calls.append({"pg": group_name(pg), "seq": seq, "op": op, "src": src, "dst": dst, "issued_ns": issued})
            except Exception:  # noqa: BLE001 - a group c10d does not know: the op goes unnamed, never fails
                pass
            return work

        return call

    for name in originals:
        setattr(pg_class, name, wrapped(name, getattr(pg_class, name)))
    try:
        yield calls
    finally:
        for name, fn in originals.items():
            setattr(pg_class, name, fn)


def group_ranks() -> dict[str, list[int]]:
    """Every process group this process created, by the name the flight recorder gives it -> its global ranks
    (the profiler's ``distributedInfo`` lists only some: not a DeviceMesh's groups); {} where torch keeps no such
    table."""
    try:
        names = torch.distributed.distributed_c10d._world.pg_names
        return {str(name): list(torch.distributed.get_process_group_ranks(pg)) for pg, name in names.items()}
    except Exception:  # noqa: BLE001 - a private table: without it no op is grouped, nothing fails
        return {}


# --- the dispatcher's view of c10d's ops (the planted faults over plain Gloo: suite/harness/plant/mode.py) ----------

DispatchMode = TorchDispatchMode
"""The base of a mode that sees every op the dispatcher carries (torch's CommDebugMode's)."""


def op_name(func) -> tuple[str, str]:
    """(namespace, name) of a dispatched op: ("c10d", "allreduce_"), ("_c10d_functional", "all_reduce")."""
    return func.namespace, func._opname


def op_args(func, args, kwargs) -> dict:
    """A dispatched op's arguments by their schema names (defaults filled)."""
    out = {}
    for i, arg in enumerate(func._schema.arguments):
        if i < len(args):
            out[arg.name] = args[i]
        elif arg.name in kwargs:
            out[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
    return out


def op_shape(func) -> tuple[list[str], int]:
    """(a dispatched op's argument names, how many values it returns)."""
    return [a.name for a in func._schema.arguments], len(func._schema.returns)


def resolve_group(name: str):
    """The process group c10d registered under ``name`` (what a functional collective names)."""
    return dist.distributed_c10d._resolve_process_group(name)


def wait_tensor(t: torch.Tensor) -> torch.Tensor:
    """Wait for the functional collective whose output is ``t``."""
    return torch.ops._c10d_functional.wait_tensor(t)


def reduce_scatter_base(pg, output: torch.Tensor, input: torch.Tensor, opts):
    """``pg``'s reduce_scatter of one tensor into one (its Work)."""
    return pg._reduce_scatter_base(output, input, opts)
