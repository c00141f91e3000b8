"""What the placement cases that ask where ranks live run on one rank: the session's placement (pairs, groups,
the hierarchy and a GPU run's groups, made once per session through suite.harness.groups), the topology resolve,
the intra- vs inter-node pair and group buffers and the hierarchical vs flat all_reduce, with their exact checks
and the resolves that fill in what only a rank can know; ``summed``, the in-place sum all_reduce buffers the
other builders share. The affinity builders are in pinning.py, the contiguity ones in contiguity.py, the GPU
ones in gpu.py; the declarations in cases.py and gpu_cases.py."""

from __future__ import annotations

import dataclasses
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
    algorithms,
    groups,
    restorer,
    sysinfo,
    topology,
    verify,
)


def summed(ctx: DistContext, t: torch.Tensor, call, *, checked: torch.Tensor | None = None) -> Buffers:
    """Buffers of an in-place sum all_reduce of ``t``'s pattern: ``call`` issues it; the check is exact
    against the sum over the group's ranks (of ``checked``, default ``t``); the reset restores ``t``."""
    out = t if checked is None else checked
    expected = verify.reduce_expected("sum", ctx.world_size, out.numel(), out.dtype, device=out.device, seed=ctx.seed)
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


def _rank_topology(ctx: DistContext) -> dict:
    """Which rank this is and where it runs (suite.system.topology reads the host)."""
    here = {"rank": ctx.rank, "hostname": ctx.hostnames[ctx.rank], "local_rank": ctx.local_rank}
    return here | topology.local_topology(ctx.device)


def resolve_topology(case: Case, ctx: DistContext, cfg: BenchConfig, session: Session) -> Case:
    p = placement_of(ctx, session)
    per_rank: list = [None] * ctx.world_size
    dist.all_gather_object(per_rank, _rank_topology(ctx), group=ctx.group)
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
        send = verify.pattern(me, count, dt, world_size=ctx.world_size, device=ctx.device, seed=ctx.seed)
        recv = torch.full((count,), -1, dtype=dt, device=ctx.device)
        return Buffers(
            call=lambda a: algorithms.exchange(send, recv, peer, peer, ctx.group, wait=not a),
            check=lambda: verify.count_wrong(
                recv, verify.pattern(peer, count, dt, world_size=ctx.world_size, device=ctx.device, seed=ctx.seed)
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
        t = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=ctx.device, seed=ctx.seed)
        return summed(ctx, t, lambda a: dist.all_reduce(t, group=ctx.group, async_op=a))

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
            return verify.pattern(ctx.rank, count, dt, world_size=n, device=ctx.device, seed=ctx.seed)

        flat = fresh()  # the backend's own result, for "equal to flat"
        dist.all_reduce(flat, group=ctx.group)
        out = fresh()

        def call(_a):
            if algo == "flat":
                dist.all_reduce(out, group=ctx.group)
            else:
                algorithms.hierarchical_all_reduce(out, h)

        def check() -> int:
            expected = verify.reduce_expected("sum", n, count, dt, device=ctx.device, seed=ctx.seed)
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
