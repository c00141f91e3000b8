"""What each placement case runs on one rank: the placement's pairs and groups (made once per session
through suite.harness.groups), the pair, group, hierarchical, pinned, contiguous/transposed and GPU
buffers with their exact checks, and the resolves that fill in what only a rank can know (topology,
copy peaks). The declarations are in cases.py."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from suite.api import (
    BenchConfig,
    Buffers,
    Case,
    CaseFailed,
    CaseSkipped,
    DistContext,
    Session,
    affinity,
    algorithms,
    groups,
    restorer,
    sysinfo,
    topology,
    verify,
)

EXPERIMENT = "placement"


def _summed(ctx: DistContext, t: torch.Tensor, call, *, checked: torch.Tensor | None = None) -> Buffers:
    """Buffers of an in-place sum all_reduce of ``t``'s pattern: ``call`` issues it; the check is exact
    against the sum over the group's ranks (of ``checked``, default ``t``); the reset restores ``t``."""
    out = t if checked is None else checked
    expected = verify.reduce_expected("sum", ctx.world_size, out.numel(), out.dtype, device=out.device)
    return Buffers(
        call=call, check=lambda: verify.count_wrong(out, expected), outputs=lambda: [out], reset=restorer(out)
    )


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


def placed(ctx: DistContext, session: Session) -> DistContext:
    """``Case.context`` of cases that use the placement: build it (once), run on the session's context."""
    placement_of(ctx, session)
    return ctx


def _with_fields(case: Case, **fields) -> Case:
    return dataclasses.replace(case, fields={**case.fields, **fields})


# --- topology (read by suite.system.topology) --------------------------------------------------------


def resolve_topology(case: Case, ctx: DistContext, cfg: BenchConfig, session: Session) -> Case:
    p = placement_of(ctx, session)
    per_rank: list = [None] * ctx.world_size
    dist.all_gather_object(per_rank, topology.local_topology(ctx), group=ctx.group)
    return _with_fields(
        case,
        ranks=per_rank,
        nodes=list(p.real_layout),
        grouping_nodes=list(p.grouping_layout),
        fake_nodes=p.fake_nodes,
        nvidia_smi_topo=sysinfo.nvidia_topology() if ctx.rank == 0 else None,
    )


# --- intra- vs inter-node pairs and groups ----------------------------------------------------


def _one_host_reason(ctx: DistContext, what: str) -> str:
    return (
        f"all {ctx.world_size} ranks run on one host ({ctx.hostnames[0]}): every {what} is intra-node; "
        "a multi-node run (docker compose, Slurm) shows inter-node"
    )


def missing_reason(ctx: DistContext, kind: str, what: str) -> str:
    return _one_host_reason(ctx, what) if kind == "inter" else f"node 0 has a single rank: no intra-node {what}"


def pair_of(ctx: DistContext, kind: str):
    pairs, _ = plan_pairs_and_groups(algorithms.node_layout(ctx.hostnames))
    return pairs[kind]


def pair_build(kind: str, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext, session: Session) -> Buffers:
        a, b = pair_of(ctx, kind)
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


def group_context(kind: str):
    def context(ctx: DistContext, session: Session) -> DistContext:
        entry = placement_of(ctx, session).groups[kind]
        if entry is None:
            raise CaseSkipped(missing_reason(ctx, kind, "group"))
        ranks, group = entry
        if ctx.rank not in ranks:  # the group's own collectives exclude this rank
            raise CaseSkipped(f"rank {ctx.rank} is not in the {kind}-node group {list(ranks)}: it sits this case out")
        return groups.sub_context(ctx, ranks, group)

    return context


def group_build(count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext, session: Session) -> Buffers:  # ctx: the group's
        t = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=ctx.device)
        return _summed(ctx, t, lambda a: dist.all_reduce(t, group=ctx.group, async_op=a))

    return build


def resolve_group(case: Case, kind: str, ctx: DistContext, session: Session) -> Case:
    p = placement_of(ctx, session)  # built by the context hook, on the session's context
    ranks, _ = p.groups[kind]
    return dataclasses.replace(
        case, fields={**case.fields, "ranks": list(ranks), "nodes": [p.real_layout[r] for r in ranks]}
    )


# --- hierarchical vs flat all_reduce -------------------------------------------------------------


def hier_build(algo: str, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext, session: Session) -> Buffers:
        n, h = ctx.world_size, placement_of(ctx, session).hierarchy

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


def resolve_hier(case: Case, algo: str, count: int, dtype: str, ctx: DistContext, session: Session) -> Case:
    p = placement_of(ctx, session)
    case = _with_fields(case, grouping_nodes=[list(r) for r in p.hierarchy.nodes], fake_nodes=p.fake_nodes)
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


# --- affinity and thread count ------------------------------------------------------------------


class Pinning:
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


def affinity_build(pin: Pinning, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext, session: Session) -> Buffers:
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


def affinity_skip(ctx: DistContext, cfg: BenchConfig) -> str | None:
    if not ctx.agree_all(hasattr(os, "sched_setaffinity")):
        return "os.sched_setaffinity is not available on this platform"
    return None


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


def contig_build(op: str, layout: str, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]
    rows, cols = matrix_shape(count)

    def view_of(base):
        # The tensor handed to torch.distributed: a (cols, rows) transposed view, or the contiguous base.
        return base.view(rows, cols).t() if layout == "transposed" else base

    def all_reduce(ctx: DistContext, session: Session) -> Buffers:
        n, me = ctx.world_size, ctx.rank
        base = verify.pattern(me, count, dt, world_size=n, device=ctx.device)
        v = view_of(base)
        return _summed(ctx, base, lambda a: dist.all_reduce(v, group=ctx.group, async_op=a))

    def send_recv(ctx: DistContext, session: Session) -> Buffers:
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


def resolve_send(case: Case, ctx: DistContext, session: Session) -> Case:
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


def roundtrip_build(count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]
    rows, cols = matrix_shape(count)

    def build(ctx: DistContext, session: Session) -> Buffers:
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


def with_copy_share(build, count: int, dtype: str):
    """``build`` whose timed record also carries the measured copy round trip of its view and its share."""
    dt = verify.DTYPE_OF[dtype]
    rows, cols = matrix_shape(count)

    def built(ctx: DistContext, session: Session) -> Buffers:
        b = build(ctx, session)

        def make_call():
            return _roundtrip_call(torch.zeros(count, dtype=dt, device=ctx.device).view(rows, cols).t())

        def derive(m, around, session) -> dict:
            copy = session.baseline(_roundtrip_key(count, dtype), ctx, make_call)
            return {"copy_roundtrip_us": copy.median_s * 1e6, "copy_share": copy.median_s / m.median_s}

        return dataclasses.replace(b, derive=derive)

    return built


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


def gpu_context(mode: str):
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


def gpu_build(mode: str, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext, session: Session) -> Buffers:
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


def staging_context(ctx: DistContext, session: Session) -> DistContext:
    p = placement_of(ctx, session)
    _skip_without_gpu(ctx)
    return groups.with_group(ctx, p.gloo_cpu, backend="gloo")


def staging_build(mem: str, non_blocking: bool, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext, session: Session) -> Buffers:  # ctx: Gloo on the GPU run's device
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


def copy_context(ctx: DistContext, session: Session) -> DistContext:
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


def copy_build(direction: str, mem: str, count: int):
    dt = torch.float32
    moved = 2 if direction == "d2d" else 1  # a device copy reads and writes every byte
    pin = mem == "pinned"
    non_blocking = pin  # a pageable copy is synchronous whatever the flag says

    def build(ctx: DistContext, session: Session) -> Buffers:
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


def resolve_copy(case: Case, direction: str, ctx: DistContext, session: Session) -> Case:
    peak, link = _copy_peak(direction, ctx, session)
    return dataclasses.replace(case, fields={**case.fields, "nominal_peak_gbps": peak, "link": link})
