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

Every case is declared (suite/case.py) and run by the harness (suite/runner.py);
the process groups the cases share are built once per session (``placement_of``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from suite.api import collectives, verify
from suite.api import algorithms
from suite.api import Buffers, Bytes, Case, CaseFailed, CaseSkipped, Session, experiment_test, restorer
from suite.api import BenchConfig
from suite.api import DistContext
from suite.api import groups
from suite.api import affinity, sysinfo, topology

EXPERIMENT = "placement"

WHOLE_BUFFER = "the whole buffer of the collective (nccl-tests S)"


def _summed(ctx: DistContext, t: torch.Tensor, call, *, checked: torch.Tensor | None = None) -> Buffers:
    """Buffers of an in-place sum all_reduce of ``t``'s pattern: ``call`` issues it; the check is exact
    against the sum over the group's ranks (of ``checked``, default ``t``); the reset restores ``t``."""
    out = t if checked is None else checked
    expected = verify.reduce_expected("sum", ctx.world_size, out.numel(), out.dtype, device=out.device)
    return Buffers(
        call=call, check=lambda: verify.count_wrong(out, expected), outputs=lambda: [out], reset=restorer(out)
    )


def _all_reduce_case(label: str, identity: dict, count: int, dtype: str, **kw) -> Case:
    """An in-place sum all_reduce case of this experiment (the whole buffer counts, the all_reduce factor)."""
    return Case(
        experiment=EXPERIMENT,
        op="all_reduce",
        label=label,
        identity={**identity, "redop": "sum", "in_place": True},
        bytes=Bytes(
            size_bytes=count * collectives.elsize(dtype),
            count=count,
            dtype=dtype,
            bw_op="all_reduce",
            definition=WHOLE_BUFFER,
        ),
        **kw,
    )


def _count(size: int, dtype: str) -> int:
    return size // collectives.elsize(dtype)


# --- groups: created once per session, on every rank, in the same order ---------------------


@dataclass
class Placement:
    real_layout: tuple[int, ...]
    """Node of every rank from its hostname."""
    grouping_layout: tuple[int, ...]
    """Node of every rank as the hierarchy groups them (SUITE_FAKE_NODES, else real)."""
    pairs: dict
    """intra/inter -> (rank a, rank b) or None."""
    groups: dict
    """intra/inter -> (ranks, process group or NON_GROUP_MEMBER) or None."""
    hierarchy: algorithms.Hierarchy
    fake_nodes: int
    gloo_cpu: object | None = None
    """GPU runs: a Gloo group for CPU tensors (staging, CPU baselines)."""
    gloo_cuda: object | None = None
    """GPU runs: a Gloo group used with CUDA tensors."""
    nccl: object | None = None


def plan_pairs_and_groups(layout: tuple[int, ...]) -> tuple[dict, dict]:
    """Rank pairs and equal-sized groups on one node vs across nodes (pure)."""
    nodes = algorithms.ranks_by_node(layout)
    node0 = nodes[0]
    pairs = {
        "intra": (node0[0], node0[1]) if len(node0) > 1 else None,
        "inter": (node0[0], nodes[1][0]) if len(nodes) > 1 else None,
    }
    if len(nodes) > 1:
        m = min(len(node0), len(nodes))
        intra = node0[:m] if m > 1 else None
        inter = tuple(n[0] for n in nodes[:m]) if m > 1 else None
    else:
        intra, inter = (node0 if len(node0) > 1 else None), None
    return pairs, {"intra": intra, "inter": inter}


def _build_placement(ctx: DistContext, fake: int) -> Placement:
    timeout = groups.timeout_of(ctx)
    try:
        grouping = algorithms.node_layout(ctx.hostnames, fake)
    except ValueError as e:  # the same config on every rank: every rank fails alike, before any new_group
        raise CaseFailed(str(e)) from None
    real = algorithms.node_layout(ctx.hostnames)
    pairs, granks = plan_pairs_and_groups(real)
    subgroups = groups.subgroups(ctx, granks)
    hierarchy = algorithms.build_hierarchy(grouping, ctx.rank, timeout=timeout)
    p = Placement(
        real_layout=real, grouping_layout=grouping, pairs=pairs, groups=subgroups, hierarchy=hierarchy, fake_nodes=fake
    )
    if ctx.device.type == "cuda":
        p.gloo_cpu, p.gloo_cuda, p.nccl = groups.gpu_side_groups(ctx)
    return p


def placement_of(ctx: DistContext, session: Session) -> Placement:
    """The session's placement groups, built on first use (collective: every rank builds them at the same
    case, in the same order). ``ctx`` must be the session's (world) context the first time."""
    return session.once("placement", lambda: _build_placement(ctx, session.cfg.placement.fake_nodes))


def _placed(ctx: DistContext, session: Session) -> DistContext:
    """``Case.context`` of cases that use the placement: build it (once), run on the session's context."""
    placement_of(ctx, session)
    return ctx


def _bound_at_run_time(ctx: DistContext) -> Buffers:
    raise RuntimeError("this case's build is bound by its resolve hook (it needs the session's groups)")


def _bind(case: Case, build, **fields) -> Case:
    return dataclasses.replace(case, build=build, fields={**case.fields, **fields})


# --- topology (read by suite.system.topology) --------------------------------------------------------


def _resolve_topology(case: Case, ctx: DistContext, cfg: BenchConfig, session: Session) -> Case:
    p = placement_of(ctx, session)
    per_rank: list = [None] * ctx.world_size
    dist.all_gather_object(per_rank, topology.local_topology(ctx), group=ctx.group)
    return _bind(
        case,
        collectives.barrier_buffers,
        ranks=per_rank,
        nodes=list(p.real_layout),
        grouping_nodes=list(p.grouping_layout),
        fake_nodes=p.fake_nodes,
        nvidia_smi_topo=sysinfo.nvidia_topology() if ctx.rank == 0 else None,
    )


def topology_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Where every rank runs (host, node, CPUs, NUMA, GPU); timed: a world barrier."""
    case = Case(
        experiment=EXPERIMENT,
        op="topology",
        label="topology",
        identity={},
        bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None, definition="none: a barrier moves no data"),
        build=_bound_at_run_time,
        context=_placed,
        max_iters=5,
        warmup=1,
        unchecked="topology is gathered, not computed; the timed op is a barrier, which moves no data",
        fields={"table": "topology", "timed": "barrier"},
        resolve=_resolve_topology,
    )
    return [case]


# --- intra- vs inter-node pairs and groups ----------------------------------------------------


def _one_host_reason(ctx: DistContext, what: str) -> str:
    return (
        f"all {ctx.world_size} ranks run on one host ({ctx.hostnames[0]}): every {what} is intra-node; "
        "a multi-node run (docker compose, Slurm) shows inter-node"
    )


def _missing_reason(ctx: DistContext, kind: str, what: str) -> str:
    return _one_host_reason(ctx, what) if kind == "inter" else f"node 0 has a single rank: no intra-node {what}"


def _pair_of(ctx: DistContext, kind: str):
    pairs, _ = plan_pairs_and_groups(algorithms.node_layout(ctx.hostnames))
    return pairs[kind]


def _pair_build(kind: str, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext) -> Buffers:
        a, b = _pair_of(ctx, kind)
        layout = algorithms.node_layout(ctx.hostnames)
        me = ctx.rank
        peer = b if me == a else a if me == b else None
        fields = {"ranks": [a, b], "nodes": [layout[a], layout[b]]}
        if peer is None:  # not in the pair: nothing to send, nothing to check
            return Buffers(call=lambda _a: None, check=lambda: 0, fields=fields)
        send = verify.pattern(me, count, dt, world_size=ctx.world_size, device=ctx.device)
        recv = torch.full((count,), -1, dtype=dt, device=ctx.device)
        return Buffers(
            call=lambda a: algorithms.exchange(send, recv, peer, peer, ctx.group, wait=not a),
            check=lambda: verify.count_wrong(
                recv, verify.pattern(peer, count, dt, world_size=ctx.world_size, device=ctx.device)
            ),
            outputs=lambda: [recv],
            fields=fields,
        )

    return build


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
                    build=_pair_build(kind, count, dtype),
                    context=_placed,
                    skip=lambda ctx, cfg, kind=kind: (
                        None if _pair_of(ctx, kind) else _missing_reason(ctx, kind, "pair")
                    ),
                    fields={
                        "table": "pairs",
                        "pattern": "both directions at once (batch_isend_irecv); size is per direction",
                    },
                )
            )
    return out


def _group_context(kind: str):
    def context(ctx: DistContext, session: Session) -> DistContext:
        entry = placement_of(ctx, session).groups[kind]
        if entry is None:
            raise CaseSkipped(_missing_reason(ctx, kind, "group"))
        ranks, group = entry
        if ctx.rank not in ranks:  # the group's own collectives exclude this rank
            raise CaseSkipped(f"rank {ctx.rank} is not in the {kind}-node group {list(ranks)}: it sits this case out")
        return groups.sub_context(ctx, ranks, group)

    return context


def _group_build(count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext) -> Buffers:  # ctx: the group's
        t = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=ctx.device)
        return _summed(ctx, t, lambda a: dist.all_reduce(t, group=ctx.group, async_op=a))

    return build


def _resolve_group(case: Case, kind: str, ctx: DistContext, session: Session) -> Case:
    p = placement_of(ctx, session)  # built by the context hook, on the session's context
    ranks, _ = p.groups[kind]
    return dataclasses.replace(
        case, fields={**case.fields, "ranks": list(ranks), "nodes": [p.real_layout[r] for r in ranks]}
    )


def group_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """all_reduce in a group of ranks on one node vs a group of the same size spread over nodes."""
    dtype = cfg.dtypes[0]
    out = []
    for kind in ("intra", "inter"):
        for s, count in collectives.counts(cfg.compared_sizes(), dtype):
            out.append(
                _all_reduce_case(
                    f"{kind}-{s}B",
                    {"placement": kind},
                    count,
                    dtype,
                    build=_group_build(count, dtype),
                    context=_group_context(kind),
                    fields={"table": "groups", "job_world_size": world_size},
                    resolve=lambda case, ctx, cfg, session, kind=kind: _resolve_group(case, kind, ctx, session),
                )
            )
    return out


# --- hierarchical vs flat all_reduce -------------------------------------------------------------


def _hier_build(algo: str, count: int, dtype: str, h: algorithms.Hierarchy):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext) -> Buffers:
        n = ctx.world_size

        def fresh():
            return verify.pattern(ctx.rank, count, dt, world_size=n, device=ctx.device)

        flat = fresh()  # the backend's own result, for "equal to flat"
        dist.all_reduce(flat, group=ctx.group)
        out = fresh()

        def call(_a):
            if algo == "flat":
                dist.all_reduce(out, group=ctx.group)
            else:
                algorithms.hierarchical_all_reduce(out, h)

        def check() -> int:
            expected = verify.reduce_expected("sum", n, count, dt, device=ctx.device)
            return verify.count_wrong_any(out, expected, flat)

        return Buffers(call=call, check=check, outputs=lambda: [out], reset=restorer(out))

    return build


def _resolve_hier(case: Case, algo: str, count: int, dtype: str, ctx: DistContext, session: Session) -> Case:
    p = placement_of(ctx, session)
    case = _bind(
        case,
        _hier_build(algo, count, dtype, p.hierarchy),
        grouping_nodes=[list(r) for r in p.hierarchy.nodes],
        fake_nodes=p.fake_nodes,
    )
    if algo == "flat":
        return case
    # named by what it does on these nodes: on one node it is reduce + broadcast, with one rank per
    # node the leaders' all_reduce alone; only several nodes with several ranks make two levels
    shape = algorithms.hierarchy_shape(p.hierarchy.nodes)
    return dataclasses.replace(
        case,
        identity={**case.identity, "algorithm": shape, "variant": f"all_reduce:{shape}"},
        record_label=case.label.replace("hierarchical", shape, 1),
        fields={**case.fields, "hierarchy": algorithms.HIERARCHY_SHAPES[shape]},
    )


def hierarchical_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Flat all_reduce vs intra-node reduce + leaders' all_reduce + intra-node broadcast (blocking:
    the hierarchical form completes inside one call)."""
    out = []
    for d in cfg.dtypes:
        for s, count in collectives.counts(cfg.compared_sizes(), d):
            for algo in ("flat", "hierarchical"):
                out.append(
                    _all_reduce_case(
                        f"{algo}-{d}-{s}B",
                        {"algorithm": algo, "variant": f"all_reduce:{algo}"},
                        count,
                        d,
                        build=_bound_at_run_time,
                        context=_placed,
                        mode="blocking",
                        fields={"table": "hierarchical"},
                        names=(algo,),  # the fault injection's name, also where the layout renames the algorithm
                        resolve=lambda case, ctx, cfg, session, algo=algo, count=count, d=d: _resolve_hier(
                            case, algo, count, d, ctx, session
                        ),
                    )
                )
    return out


# --- affinity and thread count ------------------------------------------------------------------


class _Pinning:
    """One affinity case's pinning, shared by its buffer sets: the first build pins, the first check
    after it restores; every check then verifies, on every rank, that the process finds its masks as
    before the case."""

    def __init__(self, pinning: str):
        self.pinning = pinning
        self.saved: affinity.SavedAffinity | None = None
        self.before: list[int] | None = None
        self.fields: dict = {}

    def apply(self, ctx: DistContext) -> dict:
        if self.saved is None:
            cpus = sorted(os.sched_getaffinity(0))
            core = cpus[ctx.local_rank % len(cpus)]
            self.before = cpus
            self.saved = (
                affinity.pin_process(core)
                if self.pinning == "pinned"
                else affinity.SavedAffinity(masks={}, default_mask=frozenset(cpus))
            )
            pinned = self.pinning == "pinned"
            # this rank's view (the record is rank 0's): its core, its CPU count; the torch thread count is
            # context only (it sizes ATen's pool, not Gloo's workers)
            self.fields = {
                "torch_threads": torch.get_num_threads(),
                "cpus_available": len(cpus),
                "pinned_core": core if pinned else None,
                "ranks_per_core": math.ceil(ctx.local_world_size / len(cpus)) if pinned else None,
            }
        return self.fields

    def undo(self) -> None:
        """Put the masks back (no collective: also safe when the case fails or skips)."""
        if self.saved is not None:
            affinity.restore(self.saved)
            self.saved = None

    def restore(self, ctx: DistContext) -> None:
        self.undo()
        leaked = sorted(os.sched_getaffinity(0)) != self.before
        if not ctx.agree_all(not leaked):
            raise CaseFailed("the CPU affinity was not restored after the case")


def _affinity_build(pin: _Pinning, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext) -> Buffers:
        fields = pin.apply(ctx)
        t = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=ctx.device)

        def check() -> int:
            wrong = verify.count_wrong(t, verify.reduce_expected("sum", ctx.world_size, count, dt, device=ctx.device))
            pin.restore(ctx)  # the case's teardown: the next buffer set (or case) starts unpinned
            return wrong

        return Buffers(
            call=lambda a: dist.all_reduce(t, group=ctx.group, async_op=a),
            check=check,
            outputs=lambda: [t],
            reset=restorer(t),
            fields=dict(fields),
            release=pin.undo,
        )

    return build


def _affinity_skip(ctx: DistContext, cfg: BenchConfig) -> str | None:
    if not ctx.agree_all(hasattr(os, "sched_setaffinity")):
        return "os.sched_setaffinity is not available on this platform"
    return None


def affinity_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """all_reduce at the largest compared size, every thread pinned to one core vs not."""
    sizes = cfg.compared_sizes()
    dtype = cfg.dtypes[0]
    count = _count(sizes[-1], dtype) if sizes else 0

    def skip(ctx, cfg):
        return _affinity_skip(ctx, cfg) or (None if sizes else "no non-zero size in the sweep")

    return [
        _all_reduce_case(
            p,
            {"pinning": p},
            count,
            dtype,
            build=_affinity_build(_Pinning(p), count, dtype),
            skip=skip,
            fields={"table": "affinity"},
        )
        for p in ("unpinned", "pinned")
    ]


# --- contiguous vs non-contiguous -------------------------------------------------------------


def matrix_shape(count: int) -> tuple[int, int]:
    """(rows, cols) with rows a power of two near sqrt(count) dividing count; (1, count) if none."""
    rows = 1 << max(0, int(math.log2(max(count, 1))) // 2)
    while rows > 1 and count % rows:
        rows //= 2
    return rows, count // rows


def _probe_noncontiguous_send(ctx: DistContext) -> str | None:
    """Whether send accepts a non-contiguous tensor (rank 0 -> 1); None if it does."""
    if ctx.world_size < 2:
        return None
    reason, work = None, None
    base = torch.zeros(2, 2, device=ctx.device)
    if ctx.rank == 0:
        try:
            work = dist.isend(base.t(), dst=1, group=ctx.group)
        except Exception as e:
            reason = f"{ctx.backend} send rejects a non-contiguous tensor: {str(e).strip().splitlines()[0][:120]}"
    flag = torch.tensor([0 if reason else 1], device=ctx.device)
    dist.broadcast(flag, src=0, group=ctx.group)
    if flag.item() and ctx.rank == 1:  # it was accepted: match it
        dist.recv(torch.zeros(4, device=ctx.device), src=0, group=ctx.group)
    if work is not None:
        work.wait()
    if not flag.item() and reason is None:
        reason = f"{ctx.backend} send rejects a non-contiguous tensor (on rank 0)"
    return reason


def _contig_build(op: str, layout: str, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]
    rows, cols = matrix_shape(count)

    def view_of(base):
        # The tensor handed to torch.distributed: a (cols, rows) transposed view, or the contiguous base.
        return base.view(rows, cols).t() if layout == "transposed" else base

    def all_reduce(ctx: DistContext) -> Buffers:
        n, me = ctx.world_size, ctx.rank
        base = verify.pattern(me, count, dt, world_size=n, device=ctx.device)
        v = view_of(base)
        return _summed(ctx, base, lambda a: dist.all_reduce(v, group=ctx.group, async_op=a))

    def send_recv(ctx: DistContext) -> Buffers:
        n, me = ctx.world_size, ctx.rank
        peer = me ^ 1 if (me ^ 1) < n else None  # pairs (0,1), (2,3), ...; a last odd rank sits out
        src = view_of(verify.pattern(me, count, dt, world_size=n, device=ctx.device))
        dst_base = torch.full((count,), -1, dtype=dt, device=ctx.device)
        dst_view = view_of(dst_base)

        def call(_a):
            if peer is None:
                return None
            # Non-contiguous: copy out before sending and into the view after receiving,
            # which is what code handing a view to send/recv has to do (explicit copies).
            s = src if src.is_contiguous() else src.contiguous()
            r = (
                dst_view
                if dst_view.is_contiguous()
                else torch.empty_like(dst_view, memory_format=torch.contiguous_format)
            )
            works = dist.batch_isend_irecv(
                [
                    dist.P2POp(dist.isend, s, peer=peer, group=ctx.group),
                    dist.P2POp(dist.irecv, r, peer=peer, group=ctx.group),
                ]
            )
            for w in works:
                w.wait()
            if r is not dst_view:
                dst_view.copy_(r)
            return None

        def check() -> int:
            if peer is None:
                return 0
            return verify.count_wrong(dst_base, verify.pattern(peer, count, dt, world_size=n, device=ctx.device))

        return Buffers(call=call, check=check, outputs=lambda: [dst_base] if peer is not None else [])

    return all_reduce if op == "all_reduce" else send_recv


def _resolve_send(case: Case, ctx: DistContext, session: Session) -> Case:
    reject = session.once("noncontiguous_send", lambda: _probe_noncontiguous_send(ctx))
    return dataclasses.replace(
        case,
        fields={**case.fields, "send_accepts_noncontiguous": reject is None, "send_noncontiguous_error": reject or ""},
    )


def _roundtrip_key(count: int, dtype: str) -> tuple:
    return ("contiguous_roundtrip", count, dtype)


def _roundtrip_call(view: torch.Tensor):
    """The explicit copy round trip of a non-contiguous ``view``: out to a contiguous buffer and back."""

    def call(_a):
        view.copy_(view.contiguous())
        return None

    return call


def _roundtrip_build(count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]
    rows, cols = matrix_shape(count)

    def build(ctx: DistContext) -> Buffers:
        base = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=ctx.device)
        expected = base.clone()

        def derive(m, around, session) -> dict:
            session.keep_baseline(_roundtrip_key(count, dtype), m)  # the transposed cases' copy time
            return {}

        return Buffers(
            call=_roundtrip_call(base.view(rows, cols).t()),
            outputs=lambda: [base],
            check=lambda: verify.count_wrong(base, expected),
            derive=derive,
        )

    return build


def _with_copy_share(build, count: int, dtype: str):
    """``build`` whose timed record also carries the measured copy round trip of its view and its share."""
    dt = verify.DTYPE_OF[dtype]
    rows, cols = matrix_shape(count)

    def built(ctx: DistContext) -> Buffers:
        b = build(ctx)

        def make_call():
            return _roundtrip_call(torch.zeros(count, dtype=dt, device=ctx.device).view(rows, cols).t())

        def derive(m, around, session) -> dict:
            copy = session.baseline(_roundtrip_key(count, dtype), ctx, make_call)
            return {"copy_roundtrip_us": copy.median_s * 1e6, "copy_share": copy.median_s / m.median_s}

        return dataclasses.replace(b, derive=derive)

    return built


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
            build=_roundtrip_build(count, dtype),
            mode="blocking",
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
                        return "send_recv needs at least 2 ranks"
                    return no_transpose(count) if layout == "transposed" else None

                identity = {"layout": layout}
                if op == "all_reduce":
                    identity |= {"redop": "sum", "in_place": True}
                fields = {"table": "contiguity", "shape": [cols, rows] if layout == "transposed" else [count]}
                if op == "send_recv" and layout == "transposed":
                    fields["explicit_copies"] = ".contiguous() before send, copy_ into the view after recv"
                build = _contig_build(op, layout, count, dtype)
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
                    build=_with_copy_share(build, count, dtype) if layout == "transposed" else build,
                    skip=skip,
                    mode="blocking" if op == "send_recv" else None,
                    fields=fields,
                    provenance=COPY_PROVENANCE if layout == "transposed" else {},
                )
                if op == "send_recv":
                    case = dataclasses.replace(
                        case, resolve=lambda case, ctx, cfg, session: _resolve_send(case, ctx, session)
                    )
                out.append(case)
    return out


# --- GPU placement ----------------------------------------------------------------------------


def gpu_skip_reason(ctx: DistContext) -> str | None:
    """Why the GPU cases cannot run in this run, or None."""
    if not torch.cuda.is_available():
        build = (
            f"torch {torch.__version__} is a CPU-only build"
            if torch.version.cuda is None
            else "no CUDA device is visible"
        )
        return f"GPU placement case: no CUDA ({build})"
    if ctx.device.type != "cuda":
        return "GPU placement case: this run uses CPU tensors (DEVICE=cpu); make bench-gpu runs it"
    return None


def _skip_without_gpu(ctx: DistContext) -> None:
    """Raise CaseSkipped on every rank unless every rank can run the GPU cases (collective)."""
    reason = gpu_skip_reason(ctx)
    if not ctx.agree_all(reason is None):
        raise CaseSkipped(reason or "GPU placement case: no CUDA on another rank")


GPU_MODES = ("cuda_tensor_nccl", "cpu_tensor_moved_nccl", "cuda_tensor_gloo", "cpu_tensor_gloo")


def _gpu_context(mode: str):
    def context(ctx: DistContext, session: Session) -> DistContext:
        p = placement_of(ctx, session)
        _skip_without_gpu(ctx)
        group = {
            "cuda_tensor_nccl": p.nccl,
            "cpu_tensor_moved_nccl": p.nccl,
            "cuda_tensor_gloo": p.gloo_cuda,
            "cpu_tensor_gloo": p.gloo_cpu,
        }[mode]
        if group is None:
            raise CaseSkipped(f"{mode}: no NCCL group in this run (not built, or more ranks than GPUs on a node)")
        # The case runs (and the harness times and checks) on the mode's group; a CPU tensor on Gloo
        # is a CPU case. A CPU tensor moved for NCCL keeps the GPU context (NCCL's own collectives
        # need CUDA tensors); its record says tensor_home=cpu.
        device = torch.device("cpu") if mode == "cpu_tensor_gloo" else ctx.device
        return groups.with_group(ctx, group, backend="gloo" if "gloo" in mode else "nccl", device=device)

    return context


def _gpu_build(mode: str, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext) -> Buffers:
        dev = ctx.device
        home = torch.device("cpu") if mode.startswith("cpu_tensor") else dev
        t = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=home)
        if mode == "cpu_tensor_moved_nccl":

            def call(_a):
                d = t.to(dev)  # H2D every step: what a CPU tensor costs on a GPU backend
                dist.all_reduce(d, group=ctx.group)
                t.copy_(d)  # D2H into pageable memory: synchronous
                return None
        else:

            def call(a):
                return dist.all_reduce(t, group=ctx.group, async_op=a)

        return _summed(ctx, t, call)

    return build


def gpu_placement_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """all_reduce by tensor home (CUDA, CPU) and backend (NCCL, Gloo)."""
    dtype = cfg.dtypes[0]
    out = []
    for mode in GPU_MODES:
        for s, count in collectives.counts(cfg.compared_sizes(), dtype):
            out.append(
                _all_reduce_case(
                    f"{mode}-{s}B",
                    {"placement": mode},
                    count,
                    dtype,
                    build=_gpu_build(mode, count, dtype),
                    context=_gpu_context(mode),
                    fields={
                        "table": "gpu_placement",
                        "tensor_home": "cpu" if mode.startswith("cpu_tensor") else "cuda",
                    },
                )
            )
    return out


def _staging_context(ctx: DistContext, session: Session) -> DistContext:
    p = placement_of(ctx, session)
    _skip_without_gpu(ctx)
    return groups.with_group(ctx, p.gloo_cpu, backend="gloo")


def _staging_build(mem: str, non_blocking: bool, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext) -> Buffers:  # ctx: Gloo on the GPU run's device
        dev = ctx.device
        d = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=dev)
        h = torch.empty(count, dtype=dt, pin_memory=(mem == "pinned"))

        def call(_a):
            h.copy_(d, non_blocking=non_blocking)
            if non_blocking:
                # D2H with non_blocking returns before the data lands in host memory;
                # Gloo reads the host buffer, so wait for the copy stream first.
                torch.cuda.current_stream(dev).synchronize()
            dist.all_reduce(h, group=ctx.group)
            d.copy_(h, non_blocking=non_blocking)
            return None

        return _summed(ctx, d, call)

    return build


def gpu_staging_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """D2H -> Gloo all_reduce on host -> H2D, pinned vs pageable host memory, non_blocking on/off."""
    dtype = cfg.dtypes[0]
    out = []
    for s in cfg.compared_sizes():
        count = _count(s, dtype)
        for mem in ("pinned", "pageable"):
            for nb in (False, True):
                out.append(
                    _all_reduce_case(
                        f"{mem}-{'non_blocking' if nb else 'blocking'}-{s}B",
                        {"host_memory": mem, "non_blocking": nb},
                        count,
                        dtype,
                        build=_staging_build(mem, nb, count, dtype),
                        context=_staging_context,
                        mode="blocking",
                        fields={"table": "gpu_staging", "pipeline": "D2H -> Gloo all_reduce on host -> H2D"},
                    )
                )
    return out


COPY_KINDS = (("h2d", "pinned"), ("h2d", "pageable"), ("d2h", "pinned"), ("d2h", "pageable"), ("d2d", "device"))


def _copy_context(ctx: DistContext, session: Session) -> DistContext:
    _skip_without_gpu(ctx)
    # One copy at a time on one GPU: the link's own bandwidth, on rank 0 alone (a one-rank group).
    group = groups.one_rank_group(ctx, session)
    if ctx.rank != 0:
        raise CaseSkipped(f"copy bandwidth is measured on rank 0 alone: rank {ctx.rank} sits this case out")
    return groups.sub_context(ctx, [0], group)


def _copy_peak(direction: str, ctx: DistContext, session: Session) -> tuple[float | None, str]:
    if direction == "d2d":
        return session.once(("memory_peak", ctx.device.index), lambda: topology.memory_peak_gbps(ctx.device))
    return session.once(("pcie_peak", ctx.device.index), lambda: topology.pcie_peak_gbps(ctx.device.index))


def _copy_build(direction: str, mem: str, count: int):
    dt = torch.float32
    moved = 2 if direction == "d2d" else 1  # a device copy reads and writes every byte
    pin = mem == "pinned"
    non_blocking = pin  # a pageable copy is synchronous whatever the flag says

    def build(ctx: DistContext) -> Buffers:
        dev = ctx.device
        src_dev = "cpu" if direction == "h2d" else dev
        dst_dev = "cpu" if direction == "d2h" else dev
        src = verify.pattern(0, count, dt, device=src_dev)
        if direction == "h2d" and pin:
            src = src.pin_memory()
        dst = torch.empty(count, dtype=dt, device=dst_dev, pin_memory=pin and direction == "d2h")

        def call(_a):
            dst.copy_(src, non_blocking=non_blocking)  # blocking mode: the harness syncs the device after it
            return None

        def derive(m, around, session) -> dict:
            peak, _ = _copy_peak(direction, ctx, session)
            return {"pct_of_peak": 100 * count * 4 * moved / m.median_s / 1e9 / peak if peak else None}

        return Buffers(
            call=call, check=lambda: verify.count_wrong(dst.cpu(), src.cpu()), outputs=lambda: [dst], derive=derive
        )

    return build


def _resolve_copy(case: Case, direction: str, ctx: DistContext, session: Session) -> Case:
    peak, link = _copy_peak(direction, ctx, session)
    return dataclasses.replace(case, fields={**case.fields, "nominal_peak_gbps": peak, "link": link})


def copy_bandwidth_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Standalone H2D, D2H (pinned, pageable) and D2D copies on rank 0's GPU vs the nominal peak."""
    out = []
    for direction, mem in COPY_KINDS:
        for s in cfg.sizes():
            if s <= 0:
                continue
            count = s // 4
            moved = 2 if direction == "d2d" else 1  # a device copy reads and writes every byte
            case = Case(
                experiment=EXPERIMENT,
                op="copy",
                label=f"{direction}-{mem}-{s}B",
                identity={"direction": direction, "host_memory": mem},
                bytes=Bytes(
                    size_bytes=count * 4,
                    count=count,
                    dtype="float32",
                    bw_op=None,
                    definition="bytes copied (a copy has no bus factor: algbw is the copy rate)",
                ),
                build=_copy_build(direction, mem, count),
                context=_copy_context,
                mode="blocking",
                skip=None if count else (lambda ctx, cfg, s=s: f"{s} B is smaller than one float32 element"),
                fields={"table": "copy", "non_blocking": mem == "pinned", "bytes_moved_factor": moved, "copy_rank": 0},
                provenance={
                    "nominal_peak_gbps": "modelled: 2 x memory clock x bus width (DDR), from the device properties"
                    if direction == "d2d"
                    else "modelled: PCIe payload GB/s per lane (PCI-SIG, after line encoding) x link width, "
                    "from nvidia-smi's max link generation and width",
                    "pct_of_peak": "derived: 100 x size_bytes x bytes_moved_factor / time_us / nominal_peak_gbps",
                },
            )
            out.append(
                dataclasses.replace(
                    case,
                    resolve=lambda case, ctx, cfg, session, direction=direction: _resolve_copy(
                        case, direction, ctx, session
                    ),
                )
            )
    return out


# --- the tests: one per table, every case run by the harness --------------------------------

test_topology = experiment_test(topology_cases)
test_pair = experiment_test(pair_cases)
test_group = experiment_test(group_cases)
test_hierarchical = experiment_test(hierarchical_cases)
test_affinity = experiment_test(affinity_cases)
test_contiguity = experiment_test(contiguity_cases)
test_gpu_placement = experiment_test(gpu_placement_cases)
test_gpu_staging = experiment_test(gpu_staging_cases)
test_copy_bandwidth = experiment_test(copy_bandwidth_cases)
