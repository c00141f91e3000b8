"""Placement: where ranks and tensors live, and what it costs.

CPU cases (run everywhere; multi-node under compose or Slurm):

- *topology*: per rank its host, node, CPU affinity and NUMA node(s); GPU
  hosts add each GPU's NUMA node and ``nvidia-smi topo -m``. One record
  (op ``topology``; its time fields are a world barrier's latency, nothing to check).
- *pairs*: send/recv (both directions at once) between rank 0 and a rank on
  the same node vs a rank on another node; *groups*: all_reduce inside a group
  of ranks on one node vs a group of the same size spread over nodes (the case
  runs on the group: its record's world_size is the group's; ranks outside the
  group sit the case out). Nodes come from the ranks' hostnames
  (``DistContext.node_of``); on one host every pair is intra-node and the
  inter-node cases skip saying so.
- *hierarchical vs flat all_reduce* (``suite.ops.algorithms``): intra-node reduce,
  all_reduce among node leaders, intra-node broadcast vs one flat all_reduce,
  results exact and equal to the backend's own all_reduce. ``SUITE_FAKE_NODES=k``
  splits the ranks into k contiguous blocks *for grouping only* (hostnames and
  traffic stay real) to exercise the two-level path on one host. The record
  names what the algorithm amounts to on the run's nodes
  (``suite.ops.algorithms.hierarchy_shape``): ``hierarchical`` only with several
  nodes, one of them with several ranks; on one node ``reduce_broadcast``; with
  one rank per node ``leaders_all_reduce`` (a flat all_reduce).
- *affinity*: all_reduce with every thread of each rank pinned to one core
  (``os.sched_setaffinity`` per thread, Gloo's worker threads included; rank
  by local rank) vs the inherited mask. A case's buffer sets pin when built and
  restore in their check (after the check run, and after the timed run), and
  the check fails the case if the process does not find its masks as before.
  There is no ``torch.set_num_threads`` axis: it sizes ATen's intra-op pool,
  while Gloo reduces and moves data on its own worker threads (the group's
  ``threads`` option, fixed when the group is created), so the axis changed
  nothing the case measures. The record keeps the thread count as context.
- *contiguity*: a transposed (non-contiguous) view through ``all_reduce`` and
  through send/recv (Gloo rejects non-contiguous tensors, so the case copies
  explicitly, as user code must), vs contiguous tensors, beside the measured
  explicit copy round trip of the same view (``view.copy_(view.contiguous())``,
  a case of its own): every transposed record carries that copy time and its
  share of the record's own time. Whether a backend copies a non-contiguous
  all_reduce input is not assumed: the table sets the transposed - contiguous
  difference beside the copy time.

GPU cases (skip with the reason on a host or run without CUDA):

- all_reduce of a CUDA tensor on NCCL vs a CPU tensor moved to the GPU and
  back every step (NCCL) vs a CUDA tensor on Gloo vs a CPU tensor on Gloo;
- explicit staging device -> host -> Gloo -> device with pinned vs pageable
  host buffers and ``non_blocking`` on/off (non_blocking D2H needs a stream
  sync before Gloo reads the buffer; the exact check would catch a missing one);
- standalone H2D, D2H (pinned, pageable) and D2D copy bandwidth vs size on
  rank 0 (a one-rank group: the other ranks sit it out), against the nominal
  peak: PCIe generation x width from nvidia-smi for host copies, 2 x memory
  clock x bus width for D2D (a copy reads and writes, so it is compared as
  2*S/t; the table derives the percentage of the peak).

Every case is declared (suite/case.py) and run by the harness (suite/harness/runner.py);
the process groups the cases share are built once per session (``placement_of``).
The GPU cases are declared in gpu_cases.py, what the declarations share is in declare.py;
what a rank runs is in workload.py (nodes, hierarchy), pinning.py, contiguity.py and gpu.py.
"""

from __future__ import annotations

import dataclasses

from suite.api import (
    BenchConfig,
    Bytes,
    Case,
    NeedsRanks,
    Timing,
    collectives,
    experiment_test,
)

from .contiguity import contig_build, matrix_shape, resolve_send, roundtrip_build, with_copy_share
from .declare import EXPERIMENT, WHOLE_BUFFER, all_reduce_case, count_of
from .gpu_cases import copy_bandwidth_cases, gpu_placement_cases, gpu_staging_cases
from .pinning import Pinning, affinity_build, affinity_skip
from .workload import (
    group_build,
    group_context,
    hier_build,
    missing_reason,
    pair_build,
    pair_of,
    placed,
    resolve_group,
    resolve_hier,
    resolve_topology,
)


def topology_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Where every rank runs (host, node, CPUs, NUMA, GPU); timed: a world barrier."""
    case = Case(
        experiment=EXPERIMENT,
        op="topology",
        label="topology",
        identity={},
        bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None, definition="none: a barrier moves no data"),
        build=lambda ctx, session: collectives.barrier_buffers(ctx),
        context=placed,
        timing=Timing(max_iters=5, warmup=1),
        unchecked="topology is gathered, not computed; the timed op is a barrier, which moves no data",
        fields={"table": "topology", "timed": "barrier"},
        resolve=resolve_topology,
    )
    return [case]


def pair_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """send/recv, both directions at once, between rank 0 and a rank on its node vs on another node."""
    dtype = cfg.dtypes[0]
    out = []
    for kind in ("intra", "inter"):
        for s, count in collectives.counts(cfg.compared_sizes(), dtype):
            out.append(
                Case(
                    experiment=EXPERIMENT,
                    op="send_recv",
                    label=f"{kind}-{s}B",
                    identity={"placement": kind},
                    bytes=Bytes(
                        size_bytes=count * collectives.elsize(dtype),
                        count=count,
                        dtype=dtype,
                        bw_op="send_recv",
                        definition="bytes each rank of the pair sends (per direction)",
                    ),
                    build=pair_build(kind, count, dtype),
                    context=placed,
                    skip=lambda ctx, cfg, kind=kind: None if pair_of(ctx, kind) else missing_reason(ctx, kind, "pair"),
                    fields={
                        "table": "pairs",
                        "pattern": "both directions at once (batch_isend_irecv); size is per direction",
                    },
                )
            )
    return out


def group_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """all_reduce in a group of ranks on one node vs a group of the same size spread over nodes."""
    dtype = cfg.dtypes[0]
    out = []
    for kind in ("intra", "inter"):
        for s, count in collectives.counts(cfg.compared_sizes(), dtype):
            out.append(
                all_reduce_case(
                    f"{kind}-{s}B",
                    {"placement": kind},
                    count,
                    dtype,
                    build=group_build(count, dtype),
                    context=group_context(kind),
                    fields={"table": "groups", "job_world_size": world_size},
                    resolve=lambda case, ctx, cfg, session, kind=kind: resolve_group(case, kind, ctx, session),
                )
            )
    return out


def hierarchical_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Flat all_reduce vs intra-node reduce + leaders' all_reduce + intra-node broadcast (blocking:
    the hierarchical form completes inside one call)."""
    out = []
    for d in cfg.dtypes:
        for s, count in collectives.counts(cfg.compared_sizes(), d):
            for algo in ("flat", "hierarchical"):
                out.append(
                    all_reduce_case(
                        f"{algo}-{d}-{s}B",
                        {"algorithm": algo, "variant": f"all_reduce:{algo}"},
                        count,
                        d,
                        build=hier_build(algo, count, d),
                        context=placed,
                        timing=Timing(mode="blocking"),
                        fields={"table": "hierarchical"},
                        names=(algo,),  # the fault injection's name, also where the layout renames the algorithm
                        resolve=lambda case, ctx, cfg, session, algo=algo, count=count, d=d: resolve_hier(
                            case, algo, count, d, ctx, session
                        ),
                    )
                )
    return out


def affinity_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """all_reduce at the largest compared size, every thread pinned to one core vs not."""
    sizes = cfg.compared_sizes()
    dtype = cfg.dtypes[0]
    count = count_of(sizes[-1], dtype) if sizes else 0

    def skip(ctx, cfg):
        return affinity_skip(ctx, cfg) or (None if sizes else "no non-zero size in the sweep")

    return [
        all_reduce_case(
            p,
            {"pinning": p},
            count,
            dtype,
            build=affinity_build(Pinning(p), count, dtype),
            skip=skip,
            fields={"table": "affinity"},
        )
        for p in ("unpinned", "pinned")
    ]


COPY_PROVENANCE = {
    "copy_roundtrip_us": "measured: median time (blocking, cross-rank max) of view.copy_(view.contiguous()) on a "
    "transposed view of the same shape and size (the copy case of this size, or a session "
    "baseline when that case did not run)",
    "copy_share": "derived: copy_roundtrip_us / time_us",
}


def contiguity_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Per size: the explicit copy round trip of a transposed view, then a transposed view vs a contiguous
    tensor through all_reduce and through send/recv; the transposed records carry the measured copy time
    and its share of their own time (whether the backend copies is for the numbers to show, not assumed)."""
    dtype = cfg.dtypes[0]
    sizes = collectives.counts(cfg.compared_sizes(), dtype)

    def no_transpose(count):
        rows, cols = matrix_shape(count)
        if rows == 1 or cols == 1:
            return f"{count} elements have no 2-D shape whose transpose is non-contiguous"
        return None

    out = [
        Case(
            experiment=EXPERIMENT,
            op="copy",
            label=f"copy-transposed-{s}B",
            identity={"layout": "transposed", "copy": "contiguous_roundtrip"},
            bytes=Bytes(
                size_bytes=count * collectives.elsize(dtype),
                count=count,
                dtype=dtype,
                bw_op=None,
                definition="bytes of the view; the round trip copies them twice (out and back)",
            ),
            build=roundtrip_build(count, dtype),
            timing=Timing(mode="blocking"),
            skip=lambda ctx, cfg, count=count: no_transpose(count),
            fields={
                "table": "contiguity",
                "shape": list(matrix_shape(count)[::-1]),
                "copy_call": "view.copy_(view.contiguous())",
            },
        )
        for s, count in sizes
    ]
    for op in ("all_reduce", "send_recv"):
        for s, count in sizes:
            rows, cols = matrix_shape(count)
            for layout in ("contiguous", "transposed"):

                def skip(ctx, cfg, op=op, layout=layout, count=count):
                    if op == "send_recv" and ctx.world_size < 2:
                        return NeedsRanks(2, "send_recv needs at least 2 ranks")
                    return no_transpose(count) if layout == "transposed" else None

                identity = {"layout": layout}
                if op == "all_reduce":
                    identity |= {"redop": "sum", "in_place": True}
                fields = {"table": "contiguity", "shape": [cols, rows] if layout == "transposed" else [count]}
                if op == "send_recv" and layout == "transposed":
                    fields["explicit_copies"] = ".contiguous() before send, copy_ into the view after recv"
                build = contig_build(op, layout, count, dtype)
                case = Case(
                    experiment=EXPERIMENT,
                    op=op,
                    label=f"{op}-{layout}-{s}B",
                    identity=identity,
                    bytes=Bytes(
                        size_bytes=count * collectives.elsize(dtype),
                        count=count,
                        dtype=dtype,
                        bw_op=op,
                        definition=WHOLE_BUFFER
                        if op == "all_reduce"
                        else "bytes each rank of a pair sends (per direction)",
                    ),
                    build=with_copy_share(build, count, dtype) if layout == "transposed" else build,
                    skip=skip,
                    timing=Timing(mode="blocking" if op == "send_recv" else None),
                    fields=fields,
                    provenance=COPY_PROVENANCE if layout == "transposed" else {},
                )
                if op == "send_recv":
                    case = dataclasses.replace(
                        case, resolve=lambda case, ctx, cfg, session: resolve_send(case, ctx, session)
                    )
                out.append(case)
    return out


test_topology = experiment_test(topology_cases)


test_pair = experiment_test(pair_cases)


test_group = experiment_test(group_cases)


test_hierarchical = experiment_test(hierarchical_cases)


test_affinity = experiment_test(affinity_cases)


test_contiguity = experiment_test(contiguity_cases)


test_gpu_placement = experiment_test(gpu_placement_cases)


test_gpu_staging = experiment_test(gpu_staging_cases)


test_copy_bandwidth = experiment_test(copy_bandwidth_cases)
