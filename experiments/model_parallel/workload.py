"""What each model_parallel case runs on one rank: the split layer's scatter, forward and train step, the
data-parallel step under DDP, and the pipeline's stages, relay and schedules, with the exact inputs their
checks need. The declarations are in cases.py; the check rule in check.py."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from suite.api import Buffers, DistContext, verify

from .check import LR, count_outside, reference_step, train_check_rule, train_tolerance
from .settings import ModelParallelSettings

MICROBATCHES = (1, 2, 4, 8)


def _ints(shape: tuple[int, ...], salt: int, device) -> torch.Tensor:
    """Small integers −2..2 as float32: every product and sum of the layer is exact."""
    n = math.prod(shape)
    idx = torch.arange(n, dtype=torch.int64, device=device)
    return (((idx * 7 + salt * 13) % 5) - 2).to(torch.float32).reshape(shape)


def _rows(layer: ModelParallelSettings, ctx: DistContext) -> int:
    return layer.out_features // ctx.world_size


def _scatter_weight(w_full: torch.Tensor | None, layer: ModelParallelSettings, ctx: DistContext) -> torch.Tensor:
    """Rank r receives rows r·c..(r+1)·c of rank 0's weight."""
    c = _rows(layer, ctx)
    out = torch.empty(c, layer.in_features, device=ctx.device)
    chunks = list(w_full.split(c)) if ctx.rank == 0 else None
    dist.scatter(out, scatter_list=[t.contiguous() for t in chunks] if chunks else None, src=0, group=ctx.group)
    return out


def _combine(y_local: torch.Tensor, ctx: DistContext, how: str) -> torch.Tensor | None:
    """Full output (batch × out) from every rank's column block; None off the root for gather."""
    parts = [torch.empty_like(y_local) for _ in range(ctx.world_size)]
    if how == "all_gather":
        dist.all_gather(parts, y_local.contiguous(), group=ctx.group)
    else:
        dist.gather(y_local.contiguous(), gather_list=parts if ctx.rank == 0 else None, dst=0, group=ctx.group)
        if ctx.rank != 0:
            return None
    return torch.cat(parts, dim=1)


# --- the split layer's train step (its check rule is in check.py) ---------------------------------------


def _mp_step_fn(w_local: torch.nn.Parameter, x, target, ctx: DistContext):
    c = w_local.shape[0]

    def step():
        w_local.grad = None
        y_local = x @ w_local.t()
        full = _combine(y_local.detach(), ctx, "all_gather")
        # the local slice carries the autograd graph; the others are constants
        full = torch.cat([full[:, : ctx.rank * c], y_local, full[:, (ctx.rank + 1) * c :]], dim=1)
        nn.functional.mse_loss(full, target).backward()
        with torch.no_grad():
            w_local.sub_(LR * w_local.grad)

    return step


# --- the split layer: one buffer set per case ---------------------------------------------------------


def scatter_buffers(layer: ModelParallelSettings, ctx: DistContext) -> Buffers:
    c = _rows(layer, ctx)
    w_full = _ints((layer.out_features, layer.in_features), 1, ctx.device)
    src = w_full if ctx.rank == 0 else None
    got: list = [torch.empty(c, layer.in_features, device=ctx.device)]

    def call(a: bool):
        got[0] = _scatter_weight(src, layer, ctx)

    return Buffers(
        call=call,
        check=lambda: verify.count_wrong(got[0], w_full[ctx.rank * c : (ctx.rank + 1) * c]),
        outputs=lambda: (got[0],),
    )


def forward_buffers(layer: ModelParallelSettings, ctx: DistContext, how: str) -> Buffers:
    c = _rows(layer, ctx)
    w_full = _ints((layer.out_features, layer.in_features), 1, ctx.device)
    x = _ints((layer.batch, layer.in_features), 2, ctx.device)
    w_local = w_full[ctx.rank * c : (ctx.rank + 1) * c].contiguous()
    expected = x @ w_full.t()
    full: list = [None]

    def call(a: bool):
        full[0] = _combine(x @ w_local.t(), ctx, how)

    return Buffers(
        call=call,
        check=lambda: verify.count_wrong(full[0], expected) if full[0] is not None else 0,
        outputs=lambda: (full[0],) if full[0] is not None else (),
    )


def _train_data(layer: ModelParallelSettings, ctx: DistContext, split: str):
    """W0, x, target (integers −2..2), the float64 unsplit step, its rule and per-element tolerance."""
    w0 = _ints((layer.out_features, layer.in_features), 3, ctx.device)
    x = _ints((layer.batch, layer.in_features), 4, ctx.device)
    target = _ints((layer.batch, layer.out_features), 5, ctx.device)
    expected = reference_step(w0, x, target)
    rule = train_check_rule(layer, ctx.world_size, split)
    tol = train_tolerance(rule, w0, x, target, expected)
    return w0, x, target, expected, rule, tol


def _rule_fields(tol: torch.Tensor) -> dict:
    return {"check_max_tolerance": float(tol.max().item()) if tol.numel() else 0.0}


def mp_train_buffers(layer: ModelParallelSettings, ctx: DistContext) -> Buffers:
    c, n = _rows(layer, ctx), ctx.world_size
    w0, x, target, expected, rule, tol = _train_data(layer, ctx, "mp")
    initial = w0[ctx.rank * c : (ctx.rank + 1) * c].clone()
    w = nn.Parameter(initial.clone())
    step = _mp_step_fn(w, x, target, ctx)

    def reset():
        with torch.no_grad():
            w.copy_(initial)

    def check() -> int:
        # rank 0 compares every rank's rows, gathered (so a wrong element counts once; not part of the step)
        parts = [torch.empty_like(w.data) for _ in range(n)]
        dist.all_gather(parts, w.data, group=ctx.group)
        return count_outside(torch.cat(parts), expected, tol) if ctx.rank == 0 else 0

    return Buffers(
        call=lambda a: step(), check=check, outputs=lambda: (w.detach(),), reset=reset, fields=_rule_fields(tol)
    )


def dp_train_buffers(layer: ModelParallelSettings, ctx: DistContext) -> Buffers:
    n = ctx.world_size
    w0, x, target, expected, rule, tol = _train_data(layer, ctx, "dp")
    b = layer.batch // n
    xs, ts = x[ctx.rank * b : (ctx.rank + 1) * b], target[ctx.rank * b : (ctx.rank + 1) * b]
    lin = nn.Linear(layer.in_features, layer.out_features, bias=False).to(ctx.device)

    def reset():
        with torch.no_grad():
            lin.weight.copy_(w0)

    reset()
    kw = {"device_ids": [ctx.device.index]} if ctx.device.type == "cuda" else {}
    model = DDP(lin, process_group=ctx.group, **kw)
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def step(a: bool):
        opt.zero_grad(set_to_none=False)
        nn.functional.mse_loss(model(xs), ts).backward()
        opt.step()

    return Buffers(
        call=step,
        check=lambda: count_outside(lin.weight.detach(), expected, tol),
        outputs=lambda: (lin.weight.detach(),),
        reset=reset,
        fields=_rule_fields(tol),
    )


# --- the pipeline ---------------------------------------------------------------------------------------


def _stage_weight(stage: int, d: int, device) -> torch.Tensor:
    """A dense d × d matrix holding the permutation j -> j + stage + 1 (mod d): x·W rolls x's columns."""
    w = torch.zeros(d, d, device=device)
    idx = torch.arange(d, device=device)
    w[idx, (idx + stage + 1) % d] = 1.0
    return w


def _stage_forward(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    """A stage's layer: out = x·W + 1 (the matmul is the stage's compute)."""
    torch.matmul(x, w, out=out)
    out.add_(1.0)


def _unsplit_forward(x: torch.Tensor, stages: int) -> torch.Tensor:
    """Every stage's layer applied in one process, without matmuls (a roll of the columns plus 1)."""
    for s in range(stages):
        x = torch.roll(x, shifts=s + 1, dims=1) + 1
    return x


def _microbatch(pipe: ModelParallelSettings, j: int, device) -> torch.Tensor:
    return _ints((pipe.microbatch_rows, pipe.stage_features), 10 + j, device)


def pipeline_buffers(pipe: ModelParallelSettings, ctx: DistContext, m: int, schedule: str) -> Buffers:
    """Stage ``ctx.rank`` of the pipeline: its layer, its inputs (received, or made on stage 0), its outputs."""
    n, s, g, dev = ctx.world_size, ctx.rank, ctx.group, ctx.device
    rows, d = pipe.microbatch_rows, pipe.stage_features
    w = _stage_weight(s, d, dev)
    inputs = [_microbatch(pipe, j, dev) if s == 0 else torch.empty(rows, d, device=dev) for j in range(m)]
    outs = [torch.empty(rows, d, device=dev) for _ in range(m)]
    last = s == n - 1
    expected = [_unsplit_forward(_microbatch(pipe, j, dev), n) for j in range(m)] if last else []

    def blocking(a: bool):
        for j in range(m):
            if s > 0:
                dist.recv(inputs[j], s - 1, group=g)
            _stage_forward(inputs[j], w, outs[j])
            if not last:
                dist.send(outs[j], s + 1, group=g)

    def overlap(a: bool):
        recvs = [dist.irecv(inputs[0], s - 1, group=g)] if s > 0 else []
        sends = []
        for j in range(m):
            if s > 0:
                recvs[j].wait()
                if j + 1 < m:  # the next micro-batch arrives while this one is computed
                    recvs.append(dist.irecv(inputs[j + 1], s - 1, group=g))
            _stage_forward(inputs[j], w, outs[j])
            if not last:
                sends.append(dist.isend(outs[j], s + 1, group=g))
        for work in sends:
            work.wait()

    return Buffers(
        call=blocking if schedule == "blocking" else overlap,
        check=lambda: sum(verify.count_wrong(outs[j], expected[j]) for j in range(m)) if last else 0,
        outputs=lambda: outs if last else (),
    )


def stage_repeats(stages: int) -> int:
    """Back-to-back repetitions in one sample of c and of τ: the micro-batch slots of the longest schedule
    measured (max M + S − 1), so that a c or τ sample lasts about as long as the pipeline's samples and
    meets the same interruptions of a shared machine (samples of one matmul, 10-40x shorter than T,
    gave a c that T exceeded 2-3x at M >= 4 on a 2-core machine shared with other jobs)."""
    return max(MICROBATCHES) + max(stages, 1) - 1


def compute_buffers(pipe: ModelParallelSettings, ctx: DistContext, repeats: int = 1) -> Buffers:
    """One stage's layer on one micro-batch, ``repeats`` times back to back, on every rank at once (c)."""
    x = _microbatch(pipe, 0, ctx.device)
    w = _stage_weight(ctx.rank, pipe.stage_features, ctx.device)
    out = torch.empty_like(x)
    expected = torch.roll(x, shifts=ctx.rank + 1, dims=1) + 1

    def call(a: bool):
        for _ in range(repeats):
            _stage_forward(x, w, out)

    return Buffers(
        call=call,
        check=lambda: verify.count_wrong(out, expected),
        outputs=lambda: (out,),
    )


def relay_buffers(pipe: ModelParallelSettings, ctx: DistContext, repeats: int = 1) -> Buffers:
    """One micro-batch relayed 0 -> 1 -> ... -> S−1, blocking, no compute (S−1 hops of τ), ``repeats``
    times back to back."""
    n, s, g = ctx.world_size, ctx.rank, ctx.group
    sent = _microbatch(pipe, 0, ctx.device)
    buf = sent.clone() if s == 0 else torch.empty_like(sent)

    def call(a: bool):
        for _ in range(repeats):
            if s > 0:
                dist.recv(buf, s - 1, group=g)
            if s < n - 1:
                dist.send(buf, s + 1, group=g)

    return Buffers(
        call=call, check=lambda: verify.count_wrong(buf, sent) if s > 0 else 0, outputs=lambda: (buf,) if s > 0 else ()
    )
