"""The private parts of torch that the sharded inventory reads, each behind a version check.

``CommDebugMode`` (torch.distributed.tensor.debug) is public, but what this experiment needs beyond its
counts is not: whether the op runs in backward (its ``advanced_module_tracker.is_bw``), the set of c10d
collective ops it counts (``_comm_mode.c10d_collective_ops``) and the process group inside a c10d op's
arguments (a ``ProcessGroup`` boxed in a ScriptObject). Checked with torch 2.13; where one is missing the
inventory says ``unknown`` rather than guessing.
"""

from __future__ import annotations

import torch

UNKNOWN = "unknown"


def c10d_collectives() -> frozenset:
    """The c10d collective op packets CommDebugMode counts (empty when this torch does not have the set)."""
    try:
        from torch.distributed.tensor.debug import _comm_mode
    except ImportError:
        return frozenset()
    return frozenset(getattr(_comm_mode, "c10d_collective_ops", ()))


def native_to_legacy(packet):
    """CommDebugMode's name for a functional op (it counts native ``_c10d_functional`` ops under the legacy
    ``c10d_functional`` names); the packet itself where this torch has no such mapping."""
    try:
        from torch.distributed.tensor.debug import _comm_mode
    except ImportError:
        return packet
    return getattr(_comm_mode, "NATIVE_TO_PY_MAPPING", {}).get(packet, packet)


def phase(mode) -> str:
    """``backward`` or ``forward`` for the op being dispatched now under ``mode`` (a CommDebugMode), or
    ``unknown`` where this torch's mode has no module tracker that knows."""
    tracker = getattr(mode, "advanced_module_tracker", None)
    is_bw = getattr(tracker, "is_bw", None)
    if is_bw is None:
        return UNKNOWN
    return "backward" if is_bw else "forward"


def group_name(arg) -> str | None:
    """The process-group name an op argument carries: a functional op's ``group_name`` string, or a c10d
    op's boxed ProcessGroup; None for any other argument (a boxed ReduceOp, a number)."""
    import torch.distributed as dist

    if isinstance(arg, str):
        return arg
    if isinstance(arg, torch.ScriptObject):
        unbox = getattr(dist.ProcessGroup, "unbox", None)
        if unbox is None:
            return None
        try:
            return unbox(arg).group_name
        except RuntimeError:  # a ReduceOp (or another object): no group
            return None
    return None


def dispatch_mode_base() -> type:
    """``TorchDispatchMode`` (torch.utils._python_dispatch, the base CommDebugMode itself builds on): a mode
    that sees every op dispatched while it is active, c10d's send and recv included."""
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


def packet_name(func) -> str:
    """An op's name without its overload (``c10d.send``, ``c10d.recv_``), as a dispatch mode sees it."""
    return str(getattr(func, "_overloadpacket", func))
