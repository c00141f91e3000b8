"""Backends: the same cases on every backend the build and device offer, side by side.

What is measured, in one run (one process group per backend, ``new_group(backend=...)``):

- *lanes*: (backend, device) pairs. A CPU run has Gloo on CPU (plus MPI/UCC
  when torch was built with them, and MPI through the suite's mpi4py group under
  ``BACKEND=mpi``); a CUDA run adds NCCL and Gloo with CUDA
  tensors. Lanes the build or host lacks are recorded with the reason.
- *bare MPI* (``mpi4py/numpy``, bare_mpi.py): beside the MPI lane, the side-by-side
  cases called on mpi4py directly, on numpy views of the same buffers: the MPI lane's
  time over it is the cost of the Python process group. A skip with the reason elsewhere.
- *capability matrix*: every collective of the op table (``suite.ops.collectives``: its
  REGISTRY and builders, reused as they are) and a p2p ``send_recv``, for
  every dtype (and every reduce op of all_reduce), probed at run time on
  every lane: one tiny op, its error text as the reason, all ranks agreeing.
  Stored as the ``capabilities`` list of one record per lane (op
  ``capability``; its time fields are that lane's barrier latency).
- *side by side*: a subset of the collectives (sum for reducing ops, the
  first in-place form) and a ring ``send_recv`` (each rank sends to rank+1
  and receives from rank-1 with ``batch_isend_irecv``, as nccl-tests'
  sendrecv_perf), at the largest ``COMPARED_SIZES`` sizes of the sweep (``cfg.compared_sizes()``), on every
  lane; the table shows each lane's time and busbw and the ratio to the first
  lane when at least two lanes ran.
- *algorithms*: the backend's ``all_reduce`` vs a ring all_reduce written with
  p2p ops vs reduce + broadcast (``suite.ops.algorithms``), results checked exact
  and equal to the backend's, beside the ring's own step: a ``send_recv`` of
  one ring chunk (ceil(count/n) elements, rank r -> r+1). All four are timed
  blocking whatever the run's mode (the hand-written ones cannot be issued
  asynchronously). Each record states the bytes one message puts on a link
  and how many messages the busiest rank sends (``link_bytes_per_message``,
  ``link_messages``): the ring sends 2(n-1) messages of one chunk, so its
  busbw (algbw x 2(n-1)/n = bytes each rank sends / time) compares with the
  p2p step's bandwidth at the chunk size, not at the all_reduce's size.
- *Gloo transport path*: torch's Gloo is built with its TCP transport only
  (no ibverbs/uv in the PyPI wheels); the choice it offers is the interface
  (``GLOO_SOCKET_IFNAME``), read when a group is created. Two interfaces are
  two paths only across hosts, and only where each leads to the other hosts
  through itself (``interface_paths``: every rank's interfaces, whether they
  are loopback, and its routes); on one host every local address goes through
  the kernel loopback. The cases run one per such interface where the ranks
  have two on different networks (e.g. compose nodes on two networks), and
  skip with the reason otherwise.
- *NCCL algorithm/protocol* (``NCCL_ALGO``/``NCCL_PROTO``): NCCL reads them
  when the process's communicators are set up, so a comparison needs separate
  runs (``NCCL_ALGO=Ring make bench-gpu EXPERIMENTS=backends``, then Tree, and
  NCCL_PROTO=Simple|LL|LL128); every NCCL record carries the values it ran with.

Every case is a declaration (suite/case.py); the harness builds, checks, times and
records. The lanes' process groups are made once per session (``suite.harness.groups.lanes_of``).
"""

from __future__ import annotations

import dataclasses
import os

import torch

from suite.api import (
    BenchConfig,
    Bytes,
    Case,
    DistContext,
    NeedsRanks,
    PreflightError,
    Timing,
    experiment_test,
    groups,
    record_of,
    resolve_device,
)
from suite.api import collectives as ops
from suite.api import sweep

from . import bare_mpi, ratios
from .workload import (
    LINK_PROVENANCE,
    P2P_STEP,
    link_bytes,
    model_bytes_busiest_rank,
    algorithm_buffers,
    algorithm_probe,
    gloo_path_context,
    on_lane,
    resolve_gloo_path,
    send_recv_exchange,
    with_capabilities,
)

EXPERIMENT = "backends"


COMPARED_VARIANTS = (
    "all_reduce",
    "broadcast",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_to_all_single",
    "barrier",
)
"""The collectives compared across lanes (the full set runs in the collectives experiment)."""


ALGORITHMS = ("all_reduce", "ring_p2p", "reduce_broadcast")


def _device_type(cfg: BenchConfig) -> str:
    try:
        return resolve_device(cfg.device)
    except PreflightError:  # the launcher reports this before any rank starts
        return "cpu"


def _planned(cfg: BenchConfig) -> list[groups.Lane]:
    return groups.plan_lanes(_device_type(cfg))[0]


def _lane_fields(key: str) -> dict:
    backend, device = key.split("-", 1)
    f = {"lane": f"{backend}/{device}"}
    for var in record_of(backend).lane_tuning:  # NCCL: NCCL_ALGO, NCCL_PROTO
        f[var.lower()] = os.environ.get(var, "default")
    return f


def _need_two(ctx: DistContext, cfg: BenchConfig) -> str | None:
    return NeedsRanks(2, "send_recv needs at least 2 ranks") if ctx.world_size < 2 else None


def capability_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """One record per lane: the capability matrix, timed by the lane's barrier (context, not the point)."""
    return [
        Case(
            experiment=EXPERIMENT,
            op="capability",
            label=lane.key,
            identity={"lane_key": lane.key},
            bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None, definition="none: a barrier"),
            build=lambda ctx, session: ops.barrier_buffers(ctx),
            unchecked="the capability matrix is probes; its time is the lane's barrier, which moves no data",
            fields={
                "table": "capability",
                "timed": "barrier",
                "torch_version": torch.__version__,
                **_lane_fields(lane.key),
            },
            context=on_lane(lane.key),
            timing=Timing(max_iters=5, warmup=1),
            resolve=with_capabilities,
        )
        for lane in _planned(cfg)
    ]


def _compared_args(cfg: BenchConfig, world_size: int):
    """(collective, args) of every compared call: sum for reducing ops, the first in-place form, the largest sizes."""
    sizes = cfg.compared_sizes()
    sub = dataclasses.replace(cfg, redops=("sum",))
    for v in COMPARED_VARIANTS if sizes else ():
        coll = ops.BY_VARIANT[v]
        for a in sweep.args_for(coll, sub, world_size, sizes):
            if a.in_place == coll.in_place_forms[0]:
                yield coll, a


def _collective_case(coll, a, key: str) -> Case:
    return sweep.collective_case(
        coll,
        a,
        experiment=EXPERIMENT,
        label=f"{key}-{sweep.label_of(a)}",
        context=on_lane(key),
        identity={"lane_key": key},
        fields={"table": "compare", **_lane_fields(key)},
        support=(key,),
    )


def collective_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """A subset of the collectives (sum, the first in-place form) at the largest sizes, on every lane."""
    return [
        ratios.compared(_collective_case(coll, a, lane.key))
        for lane in _planned(cfg)
        for coll, a in _compared_args(cfg, world_size)
    ]


def _sized(cfg: BenchConfig):
    for dtype in cfg.dtypes:
        for _, count in ops.counts(cfg.compared_sizes(), dtype):
            yield dtype, count * ops.elsize(dtype), count


def _send_recv_case(key: str, dtype: str, size: int, count: int) -> Case:
    return Case(
        experiment=EXPERIMENT,
        op="send_recv",
        label=f"{key}-send_recv-{dtype}-{size}B",
        identity={"variant": "send_recv", "lane_key": key},
        bytes=Bytes(
            size_bytes=size,
            count=count,
            dtype=dtype,
            bw_op="send_recv",
            definition="bytes each rank sends to rank+1 (and receives from rank-1)",
        ),
        build=lambda ctx, session: send_recv_exchange(ctx, dtype, count),
        probe=lambda ctx: send_recv_exchange(ctx, dtype, 4),
        support=("send_recv", dtype, key),
        skip=_need_two,
        context=on_lane(key),
        fields={"table": "compare", "pattern": "ring: rank r -> r+1 (batch_isend_irecv)", **_lane_fields(key)},
    )


def send_recv_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """The ring send_recv (rank r -> r+1 with batch_isend_irecv, as nccl-tests sendrecv_perf) on every lane."""
    return [ratios.compared(_send_recv_case(lane.key, *s)) for lane in _planned(cfg) for s in _sized(cfg)]


def bare_mpi_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """The compared collectives and the ring send_recv called on mpi4py directly (experiments/backends/bare_mpi.py),
    beside the MPI lane; one skip with the reason where it does not run."""
    reason = bare_mpi.lane_reason(_device_type(cfg))
    if reason is not None:
        return [bare_mpi.absent_case(EXPERIMENT, reason)]
    key = bare_mpi.BARE
    out = [
        ratios.compared(
            bare_mpi.bare_case(
                _collective_case(coll, a, key),
                lambda ctx, coll=coll, a=a: bare_mpi.collective_buffers(coll, a, ctx),
                skip=bare_mpi.reduction_skip(coll.variant, a.dtype),
            )
        )
        for coll, a in _compared_args(cfg, world_size)
    ]
    for dtype, size, count in _sized(cfg):
        bare = bare_mpi.bare_case(
            _send_recv_case(key, dtype, size, count),
            lambda ctx, d=dtype, c=count: bare_mpi.send_recv_buffers(send_recv_exchange(ctx, d, c), ctx),
        )
        out.append(ratios.compared(bare))
    return out


def algorithm_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """The backend's all_reduce vs ring on p2p vs reduce + broadcast, and the ring's own step (a send_recv of
    one ring chunk), all timed blocking: the hand-written algorithms complete before returning, so a pipelined
    sample would compare unlike things, and the step must be timed as the ring runs it."""
    out = []
    n = world_size
    for lane in _planned(cfg):
        for dtype, size, count in _sized(cfg):
            el = ops.elsize(dtype)
            for alg in ALGORITHMS:
                per_msg, msgs = link_bytes(alg, count, el, n)
                out.append(
                    Case(
                        experiment=EXPERIMENT,
                        op="all_reduce",
                        label=f"{lane.key}-{alg}-{dtype}-{size}B",
                        identity={
                            "variant": f"all_reduce:{alg}",
                            "algorithm": alg,
                            "redop": "sum",
                            "in_place": True,
                            "lane_key": lane.key,
                        },
                        bytes=Bytes(size_bytes=size, count=count, dtype=dtype, bw_op="all_reduce"),
                        build=lambda ctx, session, a=alg, d=dtype, c=count: algorithm_buffers(a, d, c, ctx),
                        probe=algorithm_probe(alg, dtype),
                        support=("algorithm", alg, dtype, lane.key),
                        timing=Timing(mode="blocking"),
                        context=on_lane(lane.key),
                        fields={
                            "table": "algorithm",
                            "model_bytes_busiest_rank": model_bytes_busiest_rank(alg, size, n),
                            "link_bytes_per_message": per_msg,
                            "link_messages": msgs,
                            **_lane_fields(lane.key),
                        },
                        provenance=LINK_PROVENANCE,
                    )
                )
            per_msg, msgs = link_bytes(P2P_STEP, count, el, n)
            chunk = per_msg // el if n > 1 else 0
            out.append(
                Case(
                    experiment=EXPERIMENT,
                    op="send_recv",
                    label=f"{lane.key}-{P2P_STEP}-{dtype}-{size}B",
                    identity={
                        "variant": f"send_recv:{P2P_STEP}",
                        "algorithm": P2P_STEP,
                        "all_reduce_size_bytes": size,
                        "lane_key": lane.key,
                    },
                    bytes=Bytes(
                        size_bytes=per_msg,
                        count=chunk,
                        dtype=dtype,
                        bw_op="send_recv",
                        definition="one ring chunk (ceil(count/n) elements of the all_reduce of "
                        "all_reduce_size_bytes), sent by each rank to rank+1",
                    ),
                    build=lambda ctx, session, d=dtype, c=chunk: send_recv_exchange(ctx, d, c),
                    probe=lambda ctx, d=dtype: send_recv_exchange(ctx, d, 4),
                    support=("send_recv", dtype, lane.key),
                    skip=_need_two,
                    timing=Timing(mode="blocking"),
                    context=on_lane(lane.key),
                    fields={
                        "table": "algorithm",
                        "pattern": "ring: rank r -> r+1 (batch_isend_irecv), as one ring step",
                        "link_bytes_per_message": per_msg,
                        "link_messages": msgs,
                        **_lane_fields(lane.key),
                    },
                    provenance={k: LINK_PROVENANCE[k] for k in ("link_bytes_per_message", "link_messages")},
                )
            )
    return out


GLOO_PATHS = ("interface_1", "interface_2")
"""Case slots of the interface comparison, filled by ``suite.system.network.interface_paths`` at run time."""


def gloo_path_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """all_reduce over Gloo's TCP transport through each of two interfaces that lead over different paths
    (skipped with the reason where the ranks have no two such interfaces)."""
    sizes = cfg.compared_sizes()
    if not sizes:
        return []
    dtype = cfg.dtypes[0]
    coll = ops.BY_VARIANT["all_reduce"]
    a = sweep.args_for(coll, dataclasses.replace(cfg, redops=("sum",)), world_size, sizes[-1:])
    return [
        dataclasses.replace(
            sweep.collective_case(
                coll,
                args,
                experiment=EXPERIMENT,
                label=f"{path}",
                context=gloo_path_context(slot),
                identity={"gloo_path": path},
                fields={"table": "gloo_path", "transport": "tcp", "lane": "gloo/cpu"},
                support=("gloo_path", path),
            ),
            resolve=lambda case, ctx, cfg, session, slot=slot: resolve_gloo_path(case, slot, ctx, session),
        )
        for slot, path in enumerate(GLOO_PATHS)
        for args in a
        if args.dtype == dtype
    ]


test_capability = experiment_test(capability_cases)


test_backend_collective = experiment_test(collective_cases)


test_backend_send_recv = experiment_test(send_recv_cases)


test_bare_mpi = experiment_test(bare_mpi_cases)


test_all_reduce_algorithm = experiment_test(algorithm_cases)


test_gloo_path = experiment_test(gloo_path_cases)
