"""The private parts of torch that the sharded inventory reads, each behind a version check.

``CommDebugMode`` (torch.distributed.tensor.debug) is public, but what this experiment needs beyond its
counts is not: whether the op runs in backward (its ``advanced_module_tracker.is_bw``), the set of c10d
collective ops it counts (``_comm_mode.c10d_collective_ops``) and the process group inside a c10d op's
arguments (a ``ProcessGroup`` boxed in a ScriptObject), and torch's fake process group for the step without
communication (``fake_backend``). Checked with torch 2.13; where an inventory part is missing the
inventory says ``unknown`` rather than guessing.
"""

from __future__ import annotations

import importlib

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


def c10d_issued(names) -> dict[str, int | None]:
    """c10d's count of the ops this rank has issued on each process group named (its per-group sequence
    number, read through suite.harness.c10d), None for a group this torch cannot resolve or count. Resolving a
    group by name is private (``distributed_c10d._resolve_process_group``, checked with torch 2.13)."""
    import torch.distributed as dist

    from suite.api import sequence_number

    resolve = getattr(dist.distributed_c10d, "_resolve_process_group", None)
    out: dict[str, int | None] = {}
    for name in names:
        try:
            out[name] = sequence_number(resolve(name)) if resolve is not None else None
        except (RuntimeError, ValueError, KeyError):  # a group this rank is not in, or one destroyed
            out[name] = None
    return out


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


# --- torch's fake process group (the step without communication) -------------------------------------

FAKE_TESTED = "2.13"
"""The torch release whose fake process group the decomposition was checked with: its collectives return
at once, and fill their outputs from this rank's own input (an all_gather repeats this rank's shard), so
the step computes on real numbers (experiments/sharded/decompose.py checks that they stay finite)."""
FAKE_MIN = (2, 13)
"""Older releases are refused: whether their fake process group fills its outputs was not checked (a newer
one is used, and decompose.py's finite check catches outputs left unset)."""


class FakeBackendMissing(RuntimeError):
    """This torch has no usable fake process-group backend."""


def _version(v: str) -> tuple[int, int]:
    major, minor = v.split("+")[0].split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def fake_backend(version: str | None = None) -> str:
    """The backend name of torch's fake process group (``torch.testing._internal.distributed.fake_pg``,
    private: importing it registers the backend), for ``new_group(backend=...)``; FakeBackendMissing, with
    what to change, where this torch is older than FAKE_MIN or lacks the module."""
    import torch.distributed as dist

    v = torch.__version__ if version is None else version
    if _version(v) < FAKE_MIN:
        raise FakeBackendMissing(
            f"torch {v} is older than {'.'.join(map(str, FAKE_MIN))}: its fake process group was not checked to "
            f"fill collective outputs, so the sharded step's compute alone is not measured "
            f"(pip install torch>={FAKE_TESTED})"
        )
    try:
        importlib.import_module("torch.testing._internal.distributed.fake_pg")  # registers the backend
    except ImportError as e:
        raise FakeBackendMissing(
            f"torch {v} has no torch.testing._internal.distributed.fake_pg ({e}): the sharded step's compute "
            f"alone cannot be measured (checked with torch {FAKE_TESTED})"
        ) from e
    name = getattr(dist.Backend, "FAKE", None)
    if name is None:
        raise FakeBackendMissing(f"torch {v} registers no fake backend (checked with torch {FAKE_TESTED})")
    return str(name)


def dispatch_mode_base() -> type:
    """``TorchDispatchMode`` (torch.utils._python_dispatch, the base CommDebugMode itself builds on): a mode
    that sees every op dispatched while it is active, c10d's send and recv included."""
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


def packet(func):
    """The op an overload belongs to (``OpOverload._overloadpacket``), as a dispatch mode sees it."""
    return getattr(func, "_overloadpacket", func)


def packet_name(func) -> str:
    """An op's name without its overload (``c10d.send``, ``c10d.recv_``), as a dispatch mode sees it."""
    return str(packet(func))


def leaves(args, kwargs) -> list:
    """Every leaf of a dispatched op's arguments, nested lists and dicts flattened (``torch.utils._pytree``,
    torch's own flattening: no public module has it in torch 2.13)."""
    from torch.utils._pytree import tree_flatten

    flat, _ = tree_flatten((args, kwargs or {}))
    return flat


def python_groups(names) -> dict:
    """group name -> the process group, for the groups named that are Python process groups with watchers
    (suite/harness/mpi/group.py: BACKEND=mpi), whose ops never reach the dispatcher that CommDebugMode
    watches. Resolving a group by name is private (``distributed_c10d._resolve_process_group``, torch 2.13)."""
    import torch.distributed as dist

    resolve = getattr(dist.distributed_c10d, "_resolve_process_group", None)
    out = {}
    for name in names if resolve is not None else ():
        try:
            group = resolve(name)
        except Exception:  # a group this torch cannot resolve: c10d_issued says so too
            continue
        if isinstance(getattr(group, "watchers", None), list):
            out[name] = group
    return out


def set_up_stages(schedule, args: tuple, target) -> None:
    """The set-up a pipeline schedule's first step does, done now: its stages' warm-up vote and the shapes they send
    each other (``send_object_list``), from the first micro-batch's ``args`` and ``target`` (private:
    ``_initialize_stage`` of a one-stage schedule, ``_initialize_stages`` of a multi-stage one, torch 2.13; where
    neither is there, the first step does it, as before)."""
    one = getattr(schedule, "_initialize_stage", None)
    init = one or getattr(schedule, "_initialize_stages", None)
    if init is None:
        return
    for stage in getattr(schedule, "_stages", None) or [schedule._stage]:
        stage.has_backward = schedule._has_backward  # as step() sets it first
    init(args, {}, target)
