"""Collectives: time, bandwidth and exact correctness of every torch.distributed collective.

Each op is one ``Collective`` definition in ``REGISTRY`` (nccl-tests' four hooks:
byte counts via ``chunked``, inputs + expected result and the call in ``build``,
the bandwidth formula via ``op``'s busbw factor). The harness does the rest:
probing what the backend supports, warm-up and timing, verification outside
the timed region, and the record.

Sizes follow nccl-tests: ``size_bytes`` is the whole buffer of the collective
(for all_gather, reduce_scatter, all_to_all, gather, scatter: the per-rank
chunk times the world size), ``count`` is size_bytes / element size.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.distributed as dist

from suite import verify
from suite.config import BenchConfig
from suite.dist import DistContext
from suite.plugin import submit
from suite.results import make_record
from suite.timing import measure

EXPERIMENT = "collectives"

REDUCE_OP = {
    "sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
}

# torch 2.13 renamed the tensor forms (all_gather_single, reduce_scatter_single) and
# deprecated the old names; measure the current function under the familiar name.
_ALL_GATHER_TENSOR = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_REDUCE_SCATTER_TENSOR = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
FUNCTION_OF = {"all_gather_into_tensor": _ALL_GATHER_TENSOR.__name__,
               "reduce_scatter_tensor": _REDUCE_SCATTER_TENSOR.__name__}


@dataclass(frozen=True, kw_only=True)
class Case:
    """One concrete measurement: which op, at what size, in what form."""

    variant: str
    dtype: str
    redop: str | None
    size_bytes: int
    count: int
    in_place: bool
    root: int


@dataclass
class Buffers:
    """What ``build`` returns: the call, and how to check its result."""

    run: Callable[[bool], object]
    """Issue the op once (argument: async_op)."""
    wrong: Callable[[], int]
    """Wrong elements on this rank after one run from fresh inputs."""
    output: Callable[[], torch.Tensor | None]
    """This rank's checked output (for fault injection in tests); None if unchecked here."""


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
    build: Callable[[Case, DistContext], Buffers]


def _t(ctx: DistContext, case: Case, numel: int, *, rank: int | None = None, offset: int = 0) -> torch.Tensor:
    return verify.pattern(ctx.rank if rank is None else rank, numel, verify.DTYPE_OF[case.dtype],
                          redop=case.redop or "sum", world_size=ctx.world_size, offset=offset,
                          device=ctx.device)


def _blank(ctx: DistContext, case: Case, numel: int) -> torch.Tensor:
    return torch.full((numel,), -1, dtype=verify.DTYPE_OF[case.dtype], device=ctx.device)


def _expected_reduce(ctx: DistContext, case: Case, numel: int, offset: int = 0) -> torch.Tensor:
    return verify.reduce_expected(case.redop, ctx.world_size, numel, verify.DTYPE_OF[case.dtype],
                                  offset=offset, device=ctx.device)


def _chunk(ctx: DistContext, case: Case) -> int:
    return case.count // ctx.world_size


# --- builders: inputs, the call, the exact expected output -------------------------------------

def _all_reduce(case, ctx):
    t = _t(ctx, case, case.count)
    return Buffers(run=lambda a: dist.all_reduce(t, op=REDUCE_OP[case.redop], group=ctx.group, async_op=a),
                   wrong=lambda: verify.count_wrong(t, _expected_reduce(ctx, case, case.count)),
                   output=lambda: t)


def _broadcast(case, ctx):
    t = _t(ctx, case, case.count, rank=case.root) if ctx.rank == case.root else _blank(ctx, case, case.count)
    return Buffers(run=lambda a: dist.broadcast(t, src=case.root, group=ctx.group, async_op=a),
                   wrong=lambda: verify.count_wrong(t, _t(ctx, case, case.count, rank=case.root)),
                   output=lambda: t)


def _reduce(case, ctx):
    t = _t(ctx, case, case.count)
    is_root = ctx.rank == case.root
    return Buffers(run=lambda a: dist.reduce(t, dst=case.root, op=REDUCE_OP[case.redop], group=ctx.group, async_op=a),
                   wrong=lambda: verify.count_wrong(t, _expected_reduce(ctx, case, case.count)) if is_root else 0,
                   output=lambda: t if is_root else None)


def _gathered(ctx, case, c):
    return torch.cat([_t(ctx, case, c, rank=j) for j in range(ctx.world_size)])


def _all_gather(case, ctx):
    c = _chunk(ctx, case)
    inp = _t(ctx, case, c)
    outs = [_blank(ctx, case, c) for _ in range(ctx.world_size)]
    return Buffers(run=lambda a: dist.all_gather(outs, inp, group=ctx.group, async_op=a),
                   wrong=lambda: verify.count_wrong(torch.cat(outs), _gathered(ctx, case, c)),
                   output=lambda: outs[0])


def _all_gather_into_tensor(case, ctx):
    c = _chunk(ctx, case)
    out = _blank(ctx, case, c * ctx.world_size)
    if case.in_place:  # input is this rank's slice of the output (nccl-tests in-place)
        inp = out.narrow(0, ctx.rank * c, c)
        inp.copy_(_t(ctx, case, c))
    else:
        inp = _t(ctx, case, c)
    return Buffers(run=lambda a: _ALL_GATHER_TENSOR(out, inp, group=ctx.group, async_op=a),
                   wrong=lambda: verify.count_wrong(out, _gathered(ctx, case, c)),
                   output=lambda: out)


def _gather(case, ctx):
    c = _chunk(ctx, case)
    inp = _t(ctx, case, c)
    is_root = ctx.rank == case.root
    outs = [_blank(ctx, case, c) for _ in range(ctx.world_size)] if is_root else None
    return Buffers(run=lambda a: dist.gather(inp, gather_list=outs, dst=case.root, group=ctx.group, async_op=a),
                   wrong=lambda: verify.count_wrong(torch.cat(outs), _gathered(ctx, case, c)) if is_root else 0,
                   output=lambda: outs[0] if is_root else None)


def _scatter(case, ctx):
    c = _chunk(ctx, case)
    ins = [_t(ctx, case, c, rank=j) for j in range(ctx.world_size)] if ctx.rank == case.root else None
    out = _blank(ctx, case, c)
    return Buffers(run=lambda a: dist.scatter(out, scatter_list=ins, src=case.root, group=ctx.group, async_op=a),
                   wrong=lambda: verify.count_wrong(out, _t(ctx, case, c)),
                   output=lambda: out)


def _reduce_scatter(case, ctx):
    c = _chunk(ctx, case)
    ins = [_t(ctx, case, c, offset=j * c) for j in range(ctx.world_size)]
    out = _blank(ctx, case, c)
    return Buffers(run=lambda a: dist.reduce_scatter(out, ins, op=REDUCE_OP[case.redop], group=ctx.group, async_op=a),
                   wrong=lambda: verify.count_wrong(out, _expected_reduce(ctx, case, c, offset=ctx.rank * c)),
                   output=lambda: out)


def _reduce_scatter_tensor(case, ctx):
    c = _chunk(ctx, case)
    inp = _t(ctx, case, c * ctx.world_size)
    # in-place: the output is this rank's slice of the input (nccl-tests in-place)
    out = inp.narrow(0, ctx.rank * c, c) if case.in_place else _blank(ctx, case, c)
    return Buffers(run=lambda a: _REDUCE_SCATTER_TENSOR(out, inp, op=REDUCE_OP[case.redop], group=ctx.group,
                                                        async_op=a),
                   wrong=lambda: verify.count_wrong(out, _expected_reduce(ctx, case, c, offset=ctx.rank * c)),
                   output=lambda: out)


def _a2a_expected(ctx, case, c):
    # chunk j of rank r's output is what rank j addressed to r
    return torch.cat([_t(ctx, case, c, rank=j, offset=ctx.rank * c) for j in range(ctx.world_size)])


def _all_to_all_single(case, ctx):
    c = _chunk(ctx, case)
    inp = _t(ctx, case, c * ctx.world_size)  # chunk j (offset j*c) is addressed to rank j
    out = _blank(ctx, case, c * ctx.world_size)
    return Buffers(run=lambda a: dist.all_to_all_single(out, inp, group=ctx.group, async_op=a),
                   wrong=lambda: verify.count_wrong(out, _a2a_expected(ctx, case, c)),
                   output=lambda: out)


def _all_to_all(case, ctx):
    c = _chunk(ctx, case)
    ins = [_t(ctx, case, c, offset=j * c) for j in range(ctx.world_size)]
    outs = [_blank(ctx, case, c) for _ in range(ctx.world_size)]
    return Buffers(run=lambda a: dist.all_to_all(outs, ins, group=ctx.group, async_op=a),
                   wrong=lambda: verify.count_wrong(torch.cat(outs), _a2a_expected(ctx, case, c)),
                   output=lambda: outs[0])


def _barrier(case, ctx):
    kw = {"device_ids": [ctx.device.index]} if ctx.backend == "nccl" else {}
    return Buffers(run=lambda a: dist.barrier(group=ctx.group, async_op=a, **kw),
                   wrong=lambda: 0, output=lambda: None)


REGISTRY: tuple[Collective, ...] = (
    Collective(op="all_reduce", variant="all_reduce", reduces=True, in_place_forms=(True,), build=_all_reduce),
    Collective(op="broadcast", variant="broadcast", rooted=True, in_place_forms=(True,), build=_broadcast),
    Collective(op="reduce", variant="reduce", reduces=True, rooted=True, in_place_forms=(True,), build=_reduce),
    Collective(op="all_gather", variant="all_gather", chunked=True, build=_all_gather),
    Collective(op="all_gather", variant="all_gather_into_tensor", chunked=True, in_place_forms=(False, True),
               build=_all_gather_into_tensor),
    Collective(op="gather", variant="gather", rooted=True, chunked=True, build=_gather),
    Collective(op="scatter", variant="scatter", rooted=True, chunked=True, build=_scatter),
    Collective(op="reduce_scatter", variant="reduce_scatter", reduces=True, chunked=True, build=_reduce_scatter),
    Collective(op="reduce_scatter", variant="reduce_scatter_tensor", reduces=True, chunked=True,
               in_place_forms=(False, True), build=_reduce_scatter_tensor),
    Collective(op="all_to_all", variant="all_to_all_single", chunked=True, build=_all_to_all_single),
    Collective(op="all_to_all", variant="all_to_all", chunked=True, build=_all_to_all),
    Collective(op="barrier", variant="barrier", build=_barrier),
)
BY_VARIANT = {c.variant: c for c in REGISTRY}


def world_size_from_env() -> int:
    for name in ("WORLD_SIZE", "SLURM_NTASKS"):
        if name in os.environ:
            return int(os.environ[name])
    return 1


def cases_for(coll: Collective, cfg: BenchConfig, world_size: int) -> list[Case]:
    """Every case of one collective for the run's sweep (identical on all ranks)."""
    if coll.variant == "barrier":
        return [Case(variant="barrier", dtype="none", redop=None, size_bytes=0, count=0, in_place=False, root=-1)]
    out, seen = [], set()
    for dtype in cfg.dtypes:
        elsize = torch.empty((), dtype=verify.DTYPE_OF[dtype]).element_size()
        for redop in (cfg.redops if coll.reduces else (None,)):
            for in_place in coll.in_place_forms:
                for size in cfg.sizes():
                    count = size // elsize
                    if coll.chunked:
                        count = count // world_size * world_size
                    if count == 0 or (dtype, redop, in_place, count) in seen:
                        continue
                    seen.add((dtype, redop, in_place, count))
                    out.append(Case(variant=coll.variant, dtype=dtype, redop=redop, size_bytes=count * elsize,
                                    count=count, in_place=in_place, root=cfg.root if coll.rooted else -1))
    return out


def case_id(case: Case) -> str:
    parts = [case.variant]
    if case.redop:
        parts.append(case.redop)
    if case.variant != "barrier":
        parts += [case.dtype, f"{case.size_bytes}B", "inplace" if case.in_place else "oop"]
    return "-".join(parts)


def pytest_generate_tests(metafunc):
    if "case" not in metafunc.fixturenames:
        return
    cfg = metafunc.config._suite_cfg
    n = world_size_from_env()
    cases = [c for coll in REGISTRY for c in cases_for(coll, cfg, n)]
    metafunc.parametrize("case", cases, ids=[case_id(c) for c in cases])


# --- probing: what the backend supports, decided by every rank together -------------------------

def probe(ctx: DistContext, case: Case) -> str | None:
    """None if the backend runs this form of the op, else the reason it does not."""
    key = (case.variant, case.dtype, case.redop, case.in_place)
    cache = _PROBES.setdefault(id(ctx), {})
    if key not in cache:
        small = Case(variant=case.variant, dtype=case.dtype, redop=case.redop, size_bytes=0,
                     count=max(ctx.world_size, 1) * 4, in_place=case.in_place, root=case.root)
        reason = None
        try:
            b = BY_VARIANT[case.variant].build(small, ctx)
            w = b.run(False)
            if w is not None:
                w.wait()
        except Exception as e:  # the backend's own words become the skip reason
            reason = f"{ctx.backend} does not support {case_id(small).rsplit('-', 2)[0]}: " + \
                     (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        ok = ctx.agree_all(reason is None)
        if not ok and reason is None:
            reason = f"{ctx.backend} does not support {case.variant} ({case.dtype}, {case.redop}) on another rank"
        cache[key] = None if ok else reason
    return cache[key]


_PROBES: dict = {}


def test_collective(case: Case, dist_ctx: DistContext, bench_cfg: BenchConfig, benchmark, request):
    ctx = dist_ctx
    if case.root >= ctx.world_size:
        pytest.skip(f"root {case.root} not in world of {ctx.world_size}")
    reason = probe(ctx, case)
    if reason:
        pytest.skip(reason)
    coll = BY_VARIANT[case.variant]

    if os.environ.get("SUITE_INJECT_MISMATCH") == case.variant and ctx.rank == ctx.world_size - 1:
        # Fault injection for the suite's own tests: one rank calls the collective with a
        # different shape (TORCH_DISTRIBUTED_DEBUG=DETAIL must turn this into a named error).
        case = dataclasses.replace(case, count=case.count + ctx.world_size)
    m, n_wrong = check_and_measure(ctx, bench_cfg, case, inject_corruption=True)
    rec = make_record(experiment=EXPERIMENT, op=coll.op, variant=coll.variant, backend=ctx.backend,
                      device=ctx.device.type, dtype=case.dtype, world_size=ctx.world_size,
                      size_bytes=case.size_bytes, count=case.count, in_place=case.in_place, m=m,
                      n_wrong=n_wrong, redop=case.redop or "none", root=case.root,
                      function=FUNCTION_OF.get(coll.variant, coll.variant),
                      hosts=len(set(ctx.hostnames)))
    submit(request, benchmark, m, rec)


def check_and_measure(ctx: DistContext, cfg: BenchConfig, case: Case, *,
                      inject_corruption: bool = False):
    """Verify one case exactly (fresh inputs, one op, outside the timed region), then time it
    on fresh buffers. Returns (Measurement, n_wrong summed over ranks). Shared by every
    experiment that measures a registered collective (e.g. the backend comparison)."""
    coll = BY_VARIANT[case.variant]
    check = coll.build(case, ctx)
    w = check.run(False)
    if w is not None:
        w.wait()
    ctx.sync_device()
    if inject_corruption:
        _maybe_corrupt(ctx, case, check)
    n_wrong = verify.global_wrong(check.wrong(), ctx.group, ctx.device)
    del check
    timed = coll.build(case, ctx)
    return measure(ctx, cfg, timed.run), n_wrong


def _maybe_corrupt(ctx: DistContext, case: Case, b: Buffers) -> None:
    """Fault injection for the suite's own tests: SUITE_INJECT_CORRUPTION=<variant>
    flips one output element on the last rank, which the check must catch."""
    target = os.environ.get("SUITE_INJECT_CORRUPTION")
    if target and target in (case.variant, "all") and ctx.rank == ctx.world_size - 1:
        out = b.output()
        if out is not None and out.numel():
            out.view(-1)[0] = out.view(-1)[0] + 1
