"""Session-scoped process groups: the one home of ``dist.new_group`` (rule R3).

Every group here is created collectively: every rank of the world calls the same
function, with the same arguments, in the same order relative to other group
creations (``new_group`` is collective). Each waits at most the run's timeout for a
missing peer instead of torch's default 30 minutes. What a case builds once per
session is cached in its ``Session`` (no module-level caches); nothing here destroys
a group: they live as long as the world group, which the session tears down.

- lanes: one group per (backend, device) combination the build and host can run;
- subgroups of chosen ranks and a DistContext as seen from a member;
- the node groups of a two-level (hierarchical) collective, and any partition of the ranks into groups
  (a device mesh's rows, on a chosen backend);
- Gloo, NCCL groups beside the session's own on a GPU run;
- a one-rank group (rank 0 alone);
- a Gloo group whose transport uses a chosen network interface.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from suite.case import Session
from suite.harness.dist import DistContext, read_launch_env
from suite.common import backends
from suite.common.backends import gloo, nccl
from suite.common.backends import PreflightError, backend_available, c10d_name, record_of


def timeout_of(ctx: DistContext) -> datetime.timedelta:
    """The run's collective timeout, for a new group."""
    return datetime.timedelta(seconds=ctx.timeout_s)


def with_group(ctx: DistContext, group, *, backend: str | None = None, device=None) -> DistContext:
    """``ctx`` running on ``group`` (same ranks), with its backend and device where given."""
    return dataclasses.replace(
        ctx,
        group=group,
        backend=ctx.backend if backend is None else backend,
        device=ctx.device if device is None else device,
    )


# --- subgroups ------------------------------------------------------------------------------------


def subgroups(ctx: DistContext, rank_sets: dict) -> dict:
    """kind -> (ranks, group) for each kind's global ranks, None where ``rank_sets`` has none. Every
    rank creates every group (a rank outside one gets ``NON_GROUP_MEMBER``)."""
    timeout = timeout_of(ctx)
    groups = {}
    for kind, ranks in rank_sets.items():
        groups[kind] = (ranks, dist.new_group(list(ranks), timeout=timeout)) if ranks else None
    return groups


def sub_context(ctx: DistContext, ranks, group) -> DistContext:
    """The context of a subgroup ``ranks`` (global ranks, ascending) as seen from a member."""
    hosts = [ctx.hostnames[r] for r in ranks]
    me = ranks.index(ctx.rank)
    mine = hosts[me]
    return dataclasses.replace(
        ctx,
        group=group,
        rank=me,
        world_size=len(ranks),
        hostnames=hosts,
        local_rank=sum(1 for h in hosts[:me] if h == mine),
        local_world_size=sum(1 for h in hosts if h == mine),
    )


def partition_context(ctx: DistContext, session: Session, parts: Sequence[Sequence[int]]) -> DistContext:
    """This rank's part of ``parts`` (disjoint lists of global ranks that cover the world, e.g. the even and the odd
    ranks) as a context whose group ranks are not its global ranks, ``whole`` the world's (the harness times,
    checks and records such a case across every part). The groups are made once per session."""
    key = ("partition", tuple(tuple(p) for p in parts))
    mine = session.once(key, lambda: partition_group(parts, ctx.rank, timeout=timeout_of(ctx)))
    ranks = next(list(p) for p in parts if ctx.rank in p)
    return dataclasses.replace(sub_context(ctx, ranks, mine), whole=ctx)


def partition_group(
    parts: Sequence[Sequence[int]], rank: int, backend: str | None = None, timeout: datetime.timedelta | None = None
):
    """This rank's group among ``parts`` (disjoint lists of global ranks, e.g. the rows of one dimension
    of a device mesh), or None where no part holds it: every rank creates every part's group, in the same
    order. ``backend``: the groups' backend (None: the default group's)."""
    mine = None
    for ranks in parts:
        g = dist.new_group(list(ranks), backend=backend, timeout=timeout)
        if rank in ranks:
            mine = g
    return mine


def node_groups(
    nodes: Sequence[Sequence[int]], rank: int, backend: str | None = None, timeout: datetime.timedelta | None = None
) -> tuple[object, object | None]:
    """(this rank's node group, the node leaders' group or None off the leaders) for ``nodes`` (global
    ranks per node; the first of each is its leader). Pass ``timeout``: without it a new group waits
    torch's default of 30 minutes for a missing peer."""
    mine = partition_group(nodes, rank, backend, timeout)
    leaders_ranks = [r[0] for r in nodes]
    lg = dist.new_group(leaders_ranks, backend=backend, timeout=timeout)
    return mine, (lg if rank in leaders_ranks else None)


def one_rank_group(ctx: DistContext, session: Session):
    """A group of rank 0 alone, created once per session (every rank takes part in creating it)."""
    return session.once("rank0_group", lambda: dist.new_group([0], timeout=timeout_of(ctx)))


GLOO, NCCL = gloo.BACKEND.name, nccl.BACKEND.name
"""The backends of the groups beside the session's own: Gloo for CPU tensors (and CUDA ones beside NCCL), NCCL."""

# --- groups beside the session's own --------------------------------------------------------------


def gpu_side_groups(ctx: DistContext) -> tuple[object, object, object | None]:
    """On a GPU run: (a Gloo group for CPU tensors, a Gloo group used with CUDA tensors, an NCCL group
    or None). The session's own group stands in where it already is one of them. NCCL refuses two
    ranks on one GPU: with more ranks than GPUs on a node there is no NCCL group (every rank agrees
    first, as new_group is collective)."""
    timeout = timeout_of(ctx)
    gloo_cuda = ctx.group if ctx.backend == GLOO else dist.new_group(backend=GLOO, timeout=timeout)
    gloo_cpu = dist.new_group(backend=GLOO, timeout=timeout)
    nccl = None
    if ctx.backend == NCCL:
        nccl = ctx.group
    elif ctx.agree_all(dist.is_nccl_available() and ctx.local_world_size <= torch.cuda.device_count()):
        nccl = dist.new_group(backend=NCCL, timeout=timeout)
    return gloo_cpu, gloo_cuda, nccl


def gloo_on_interface(ctx: DistContext, iface: str) -> DistContext:
    """A CPU Gloo context whose group's transport binds ``iface``: Gloo reads GLOO_SOCKET_IFNAME when
    the group's device is created, so it is set for that call only and put back after."""
    old = os.environ.get("GLOO_SOCKET_IFNAME")
    os.environ["GLOO_SOCKET_IFNAME"] = iface
    try:
        group = dist.new_group(backend=GLOO, timeout=timeout_of(ctx))
    finally:
        if old is None:
            del os.environ["GLOO_SOCKET_IFNAME"]
        else:
            os.environ["GLOO_SOCKET_IFNAME"] = old
    return with_group(ctx, group, backend=GLOO, device=torch.device("cpu"))


# --- lanes: one process group per (backend, device), created once per session on every rank ---------


@dataclass(frozen=True)
class Lane:
    """One (backend, device) combination."""

    backend: str
    device: str

    @property
    def key(self) -> str:
        return f"{self.backend}-{self.device}"

    @property
    def label(self) -> str:
        return f"{self.backend}/{self.device}"


CANDIDATE_LANES = tuple(
    Lane(b.name, device) for b in sorted(backends.records(), key=lambda b: b.lane_order) for device in b.devices
)
"""Every registered backend on each device it runs on (suite/common/backends/)."""


def _mpi_launched(env=None) -> bool:
    env = os.environ if env is None else env
    return any(k in env for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"))


def _local_world(env=None) -> int:
    """Ranks on this node as init_distributed reads them (torchrun or Slurm); 1 where the launcher's
    variables are malformed (the launcher reports that before any rank starts)."""
    try:
        return read_launch_env(env).local_world_size
    except PreflightError:
        return 1


def plan_lanes(device_type: str, env=None) -> tuple[list[Lane], list[tuple[Lane, str]]]:
    """Lanes to run and lanes that cannot run with the reason. Depends only on the
    build, the host and the run's device, so it is the same on every rank."""
    run, missing = [], []
    ver = torch.__version__
    for lane in CANDIDATE_LANES:
        if not backend_available(lane.backend):
            missing.append((lane, f"{lane.backend} is not built into torch {ver}"))
        elif lane.device == "cuda" and not torch.cuda.is_available():
            why = "no CUDA device visible" if torch.version.cuda else f"torch {ver} is a CPU-only build"
            missing.append((lane, why))
        elif lane.device == "cuda" and device_type != "cuda":
            missing.append((lane, "the run uses CPU tensors (DEVICE=cpu); make bench-gpu runs the CUDA lanes"))
        elif record_of(lane.backend).one_gpu_per_rank and _local_world(env) > torch.cuda.device_count():
            missing.append(
                (
                    lane,
                    f"{record_of(lane.backend).shown} needs one GPU per rank ({_local_world(env)} ranks on this "
                    f"node, {torch.cuda.device_count()} GPU(s))",
                )
            )
        elif not record_of(lane.backend).torchrun and not _mpi_launched(env):
            be = record_of(lane.backend)
            missing.append((lane, f"{be.shown} needs ranks started by {be.launcher}: run it with BACKEND={be.name}"))
        else:
            run.append(lane)
    return run, missing


@dataclass
class Lanes:
    ctx: dict
    """lane key -> DistContext for that lane's group and device (lanes that started)."""
    failed: dict
    """lane key -> why the group could not be created."""
    missing: list
    """(Lane, reason) for lanes the build or host lacks."""


def lanes_of(ctx: DistContext, session: Session) -> Lanes:
    """The lanes' groups, created on first use (same order on every rank: new_group is collective)."""

    def make() -> Lanes:
        planned, missing = plan_lanes(ctx.device.type)
        timeout = timeout_of(ctx)
        out, failed = {}, {}
        for lane in planned:
            reason, group = None, None
            if lane.backend == ctx.backend and lane.device == ctx.device.type:
                group = ctx.group
            else:
                try:
                    group = dist.new_group(backend=c10d_name(lane.backend), timeout=timeout)
                except Exception as e:  # e.g. UCC built but its library missing at run time
                    reason = f"{lane.label}: group creation failed: {str(e).strip()[:200]}"
            if not ctx.agree_all(reason is None):
                failed[lane.key] = reason or f"{lane.label}: group creation failed on another rank"
                continue
            device = ctx.device if lane.device == ctx.device.type else torch.device(lane.device)
            # A DistContext per lane: builders, probes and the timing loop take group, device, backend from it.
            out[lane.key] = with_group(ctx, group, backend=lane.backend, device=device)
        return Lanes(ctx=out, failed=failed, missing=missing)

    return session.once("backends.lanes", make)
