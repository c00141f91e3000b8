"""The collective registry: every torch.distributed collective the suite measures, declared once (the function's
row, its family, journal code, faults, MPI method and model, is in the op table, suite/op_table.py).

Each op is one ``Collective`` in ``REGISTRY`` (nccl-tests' four hooks: byte counts via
``chunked``, inputs + exact expected result + the call in ``build``, the bandwidth
formula via ``op``'s busbw factor in suite/metrics.py). suite/ops/sweep.py turns the
table and a run's sweep into declared cases (suite/case.py) for any experiment that
measures collectives (collectives, backends, ...); the harness does the rest.

Sizes follow nccl-tests: ``size_bytes`` is the whole buffer of the collective (for
all_gather, reduce_scatter, all_to_all, gather, scatter: the per-rank chunk times the
world size), ``count`` is size_bytes / element size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from suite import op_table
from suite.harness import verify
from suite.case import Buffers, restorer
from suite.harness.dist import DistContext
from suite.harness.timing import barrier_kw

REDUCE_OP = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.AVG,
    "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
}

# torch 2.13 renamed the tensor forms (all_gather_single, reduce_scatter_single) and
# deprecated the old names; measure the current function under the familiar name (the op table's renamed_to).
FUNCTION_OF = {
    op.name: op.renamed_to if hasattr(dist, op.renamed_to) else op.name
    for op in op_table.OPS
    if op.renamed_to is not None
}


def _function(variant: str) -> str:
    """The name of torch.distributed's function of ``variant``; a call looks it up on ``dist`` each time it is
    called, as every other call does: the journal's wrapper is on ``torch.distributed`` outside the timed rounds
    and torch's own function inside them (suite/harness/journal/quiet.py), so a function taken when the buffers
    are built would record every timed op inside its sample."""
    return FUNCTION_OF[variant]


@dataclass(frozen=True, kw_only=True)
class Args:
    """The arguments of one collective call: which form, at what size."""

    variant: str
    dtype: str
    redop: str | None
    size_bytes: int
    count: int
    in_place: bool
    root: int
    start: int = 0
    """Global element index where this call's pattern begins: calls given disjoint ranges (a replay of
    a step's collectives) carry different values, so one call's output in another's place is wrong."""


@dataclass(frozen=True, kw_only=True)
class Collective:
    op: str
    """Op family; selects the busbw factor (suite.metrics)."""
    variant: str
    """The torch.distributed function measured."""
    reduces: bool = False
    rooted: bool = False
    chunked: bool = False
    """True when the buffer is n per-rank chunks (size must divide by n)."""
    in_place_forms: tuple[bool, ...] = (False,)
    build: Callable[[Args, DistContext], Buffers]


def dtype_of(name: str) -> torch.dtype:
    return verify.DTYPE_OF[name]


def elsize(name: str) -> int:
    """Bytes per element of a dtype name."""
    return torch.empty((), dtype=verify.DTYPE_OF[name]).element_size()


def counts(sizes, dtype: str) -> list[tuple[int, int]]:
    """(size, element count) for each size of ``sizes`` that holds at least one ``dtype`` element."""
    el = elsize(dtype)
    return [(s, s // el) for s in sizes if s // el]


def _t(ctx: DistContext, a: Args, numel: int, *, rank: int | None = None, offset: int = 0) -> torch.Tensor:
    return verify.pattern(
        ctx.rank if rank is None else rank,
        numel,
        dtype_of(a.dtype),
        redop=a.redop or "none",  # data that only moves may take any exact value
        world_size=ctx.world_size,
        offset=a.start + offset,
        device=ctx.device,
        seed=ctx.seed,
    )


def _blank(ctx: DistContext, a: Args, numel: int) -> torch.Tensor:
    """An output the op only writes: poison inside guard bands (verify.output), misaligned in the check run."""
    return verify.output(numel, dtype_of(a.dtype), ctx.device, misalign=ctx.check_run)


def _guarded(ctx: DistContext, t: torch.Tensor) -> torch.Tensor:
    """``t`` inside guard bands (verify.guarded), misaligned in the check run."""
    return verify.guarded(t, misalign=ctx.check_run)


def _expected_reduce(ctx: DistContext, a: Args, numel: int, offset: int = 0) -> torch.Tensor:
    return verify.reduce_expected(
        a.redop, ctx.world_size, numel, dtype_of(a.dtype), offset=a.start + offset, device=ctx.device, seed=ctx.seed
    )


def _chunk(ctx: DistContext, a: Args) -> int:
    return a.count // ctx.world_size


# --- builders: inputs, the call, the exact expected output -------------------------------------


def _all_reduce(a, ctx):
    t = _guarded(ctx, _t(ctx, a, a.count))
    g, rop = ctx.group, REDUCE_OP[a.redop]  # named once, not in each call
    return Buffers(
        call=lambda x: dist.all_reduce(t, op=rop, group=g, async_op=x),
        check=lambda: verify.count_wrong(t, _expected_reduce(ctx, a, a.count)),
        outputs=lambda: [t],
        reset=restorer(t),
    )


def _broadcast(a, ctx):
    t = _guarded(ctx, _t(ctx, a, a.count, rank=a.root)) if ctx.rank == a.root else _blank(ctx, a, a.count)
    g, root = ctx.group, a.root  # named once, not in each call
    return Buffers(
        call=lambda x: dist.broadcast(t, group=g, async_op=x, group_src=root),
        check=lambda: verify.count_wrong(t, _t(ctx, a, a.count, rank=a.root)),
        outputs=lambda: [t],
    )


def _reduce(a, ctx):
    t = _guarded(ctx, _t(ctx, a, a.count))
    is_root = ctx.rank == a.root
    g, rop, root = ctx.group, REDUCE_OP[a.redop], a.root  # named once, not in each call
    return Buffers(
        call=lambda x: dist.reduce(t, op=rop, group=g, async_op=x, group_dst=root),
        check=lambda: verify.count_wrong(t, _expected_reduce(ctx, a, a.count)) if is_root else 0,
        outputs=lambda: [t] if is_root else [],
        reset=restorer(t),
    )


def _gathered(ctx, a, c):
    return torch.cat([_t(ctx, a, c, rank=j) for j in range(ctx.world_size)])


def _all_gather(a, ctx):
    c = _chunk(ctx, a)
    inp = _t(ctx, a, c)
    outs = [_blank(ctx, a, c) for _ in range(ctx.world_size)]
    g = ctx.group  # named once, not in each call
    return Buffers(
        call=lambda x: dist.all_gather(outs, inp, group=g, async_op=x),
        check=lambda: verify.count_wrong(torch.cat(outs), _gathered(ctx, a, c)),
        outputs=lambda: outs,
        inputs=lambda: [inp],
    )


def _all_gather_into_tensor(a, ctx):
    c = _chunk(ctx, a)
    out = _blank(ctx, a, c * ctx.world_size)
    if a.in_place:  # input is this rank's slice of the output (nccl-tests in-place)
        inp = out.narrow(0, ctx.rank * c, c)
        inp.copy_(_t(ctx, a, c))
    else:
        inp = _t(ctx, a, c)
    gather = _function("all_gather_into_tensor")
    g = ctx.group  # named once, not in each call
    return Buffers(
        call=lambda x: getattr(dist, gather)(out, inp, group=g, async_op=x),
        check=lambda: verify.count_wrong(out, _gathered(ctx, a, c)),
        outputs=lambda: [out],
        inputs=lambda: [] if a.in_place else [inp],
    )


def _gather(a, ctx):
    c = _chunk(ctx, a)
    inp = _t(ctx, a, c)
    is_root = ctx.rank == a.root
    outs = [_blank(ctx, a, c) for _ in range(ctx.world_size)] if is_root else None
    g, root = ctx.group, a.root  # named once, not in each call
    return Buffers(
        call=lambda x: dist.gather(inp, gather_list=outs, group=g, async_op=x, group_dst=root),
        check=lambda: verify.count_wrong(torch.cat(outs), _gathered(ctx, a, c)) if is_root else 0,
        outputs=lambda: outs if is_root else [],
        inputs=lambda: [inp],
    )


def _scatter(a, ctx):
    c = _chunk(ctx, a)
    ins = [_t(ctx, a, c, rank=j) for j in range(ctx.world_size)] if ctx.rank == a.root else None
    out = _blank(ctx, a, c)
    g, root = ctx.group, a.root  # named once, not in each call
    return Buffers(
        call=lambda x: dist.scatter(out, scatter_list=ins, group=g, async_op=x, group_src=root),
        check=lambda: verify.count_wrong(out, _t(ctx, a, c)),
        outputs=lambda: [out],
        inputs=lambda: ins or [],
    )


def _reduce_scatter(a, ctx):
    c = _chunk(ctx, a)
    ins = [_t(ctx, a, c, offset=j * c) for j in range(ctx.world_size)]
    out = _blank(ctx, a, c)
    g, rop = ctx.group, REDUCE_OP[a.redop]  # named once, not in each call
    return Buffers(
        call=lambda x: dist.reduce_scatter(out, ins, op=rop, group=g, async_op=x),
        check=lambda: verify.count_wrong(out, _expected_reduce(ctx, a, c, offset=ctx.rank * c)),
        outputs=lambda: [out],
        inputs=lambda: ins,
        reset=restorer(*ins),
    )


def _reduce_scatter_tensor(a, ctx):
    c = _chunk(ctx, a)
    inp = _guarded(ctx, _t(ctx, a, c * ctx.world_size))
    # in-place: the output is this rank's slice of the input (nccl-tests in-place)
    out = inp.narrow(0, ctx.rank * c, c) if a.in_place else _blank(ctx, a, c)
    scatter = _function("reduce_scatter_tensor")
    g, rop = ctx.group, REDUCE_OP[a.redop]  # named once, not in each call
    return Buffers(
        call=lambda x: getattr(dist, scatter)(out, inp, op=rop, group=g, async_op=x),
        check=lambda: verify.count_wrong(out, _expected_reduce(ctx, a, c, offset=ctx.rank * c)),
        outputs=lambda: [out, inp] if a.in_place else [out],  # in place: the input's guard bands too
        inputs=lambda: [] if a.in_place else [inp],
        reset=restorer(inp),
    )


def _a2a_expected(ctx, a, c):
    # chunk j of rank r's output is what rank j addressed to r
    return torch.cat([_t(ctx, a, c, rank=j, offset=ctx.rank * c) for j in range(ctx.world_size)])


def _all_to_all_single(a, ctx):
    c = _chunk(ctx, a)
    inp = _t(ctx, a, c * ctx.world_size)  # chunk j (offset j*c) is addressed to rank j
    out = _blank(ctx, a, c * ctx.world_size)
    g = ctx.group  # named once, not in each call
    return Buffers(
        call=lambda x: dist.all_to_all_single(out, inp, group=g, async_op=x),
        check=lambda: verify.count_wrong(out, _a2a_expected(ctx, a, c)),
        outputs=lambda: [out],
        inputs=lambda: [inp],
    )


def _all_to_all(a, ctx):
    c = _chunk(ctx, a)
    ins = [_t(ctx, a, c, offset=j * c) for j in range(ctx.world_size)]
    outs = [_blank(ctx, a, c) for _ in range(ctx.world_size)]
    g = ctx.group  # named once, not in each call
    return Buffers(
        call=lambda x: dist.all_to_all(outs, ins, group=g, async_op=x),
        check=lambda: verify.count_wrong(torch.cat(outs), _a2a_expected(ctx, a, c)),
        outputs=lambda: outs,
        inputs=lambda: ins,
    )


def barrier_buffers(ctx: DistContext) -> Buffers:
    """A barrier on the context's group: nothing to check (declare the case ``unchecked``)."""
    kw = barrier_kw(ctx)  # found once, not in each call
    return Buffers(call=lambda x: dist.barrier(async_op=x, **kw))


def _barrier(a, ctx):
    return barrier_buffers(ctx)


REGISTRY: tuple[Collective, ...] = (
    Collective(op="all_reduce", variant="all_reduce", reduces=True, in_place_forms=(True,), build=_all_reduce),
    Collective(op="broadcast", variant="broadcast", rooted=True, in_place_forms=(True,), build=_broadcast),
    Collective(op="reduce", variant="reduce", reduces=True, rooted=True, in_place_forms=(True,), build=_reduce),
    Collective(op="all_gather", variant="all_gather", chunked=True, build=_all_gather),
    Collective(
        op="all_gather",
        variant="all_gather_into_tensor",
        chunked=True,
        in_place_forms=(False, True),
        build=_all_gather_into_tensor,
    ),
    Collective(op="gather", variant="gather", rooted=True, chunked=True, build=_gather),
    Collective(op="scatter", variant="scatter", rooted=True, chunked=True, build=_scatter),
    Collective(op="reduce_scatter", variant="reduce_scatter", reduces=True, chunked=True, build=_reduce_scatter),
    Collective(
        op="reduce_scatter",
        variant="reduce_scatter_tensor",
        reduces=True,
        chunked=True,
        in_place_forms=(False, True),
        build=_reduce_scatter_tensor,
    ),
    Collective(op="all_to_all", variant="all_to_all_single", chunked=True, build=_all_to_all_single),
    Collective(op="all_to_all", variant="all_to_all", chunked=True, build=_all_to_all),
    Collective(op="barrier", variant="barrier", build=_barrier),
)
BY_VARIANT = {c.variant: c for c in REGISTRY}

BARRIER_UNCHECKED = "a barrier moves no data: there is no result to check"
