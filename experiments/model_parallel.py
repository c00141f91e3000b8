"""Model parallelism as the source article describes it: one large linear layer split across ranks.

The weight ``W`` (out × in) lives on rank 0; ``scatter`` gives rank r the rows
``W[r·out/n:(r+1)·out/n]``; every rank computes its slice of the output ``x W_rᵀ`` for
the whole batch, and the slices are combined with ``all_gather`` (every rank gets the
full output) or ``gather`` (rank 0 gets it). Compared in the same run with the
data-parallel step for the same layer and the same global batch.

Cases (layer ``MP_IN`` × ``MP_OUT``, default 2048 × 2048 = 16 MB float32; global
batch ``MP_BATCH``, default 64; sizes must divide by the world size):

- ``scatter``: distributing the weight (size = the whole weight), checked exactly.
- ``mp_forward_all_gather`` / ``mp_forward_gather``: local matmul + combine (size = the
  whole output, B·out·4 bytes). Inputs and weights are small integers (−2..2), so the
  split result must equal the unsplit ``x Wᵀ`` exactly (sums stay far below 2^24).
- ``mp_train_step``: forward + all_gather + MSE loss + backward + SGD on each rank's
  rows. No gradient communication: the input is replicated, and each rank's weight rows
  get their gradient from their own output slice. Checked against one unsplit
  single-process step (tolerance ``rtol=1e-4, atol=1e-6``, float32).
- ``dp_train_step``: the same layer under DDP, the global batch split across ranks:
  the all_reduce carries the whole weight gradient (out·in·4 bytes) instead of the
  B·out·4 bytes of activations that model parallelism moves. Checked the same way.

Every case is a declared ``suite.case.Case`` run by the harness (suite/runner.py). The train
steps restore the initial weight before each timed sample (``reset``), so the check after the
timed steps is the same one-step check. ``samples_per_s`` (train steps) = global batch / the
median of a separate blocking run of the step in ``resolve`` (the protocol has no hook after
the timed region).
"""


from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from suite import verify
from suite.case import Buffers, Bytes, Case, experiment_test
from suite.config import BenchConfig, ModelParallelSettings
from suite.dist import DistContext

EXPERIMENT = "model_parallel"
LR = 0.01
RTOL, ATOL = 1e-4, 1e-6


Layer = ModelParallelSettings
"""Shape of the split layer and the global batch: ``cfg.model_parallel`` (MP_IN, MP_OUT, MP_BATCH)."""


OPS = ("scatter", "mp_forward_all_gather", "mp_forward_gather", "mp_train_step", "dp_train_step")


def _ints(shape: tuple[int, ...], salt: int, device) -> torch.Tensor:
    """Small integers −2..2 as float32: every product and sum of the layer is exact."""
    n = 1
    for s in shape:
        n *= s
    idx = torch.arange(n, dtype=torch.int64, device=device)
    return (((idx * 7 + salt * 13) % 5) - 2).to(torch.float32).reshape(shape)


def _randn(shape, seed, device) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device)


def _rows(layer: Layer, ctx: DistContext) -> int:
    return layer.out_features // ctx.world_size


def _scatter_weight(w_full: torch.Tensor | None, layer: Layer, ctx: DistContext) -> torch.Tensor:
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


def _reference_step(w: torch.Tensor, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """One unsplit single-process SGD step of the layer; returns the new weight."""
    w = w.clone().requires_grad_(True)
    nn.functional.mse_loss(x @ w.t(), target).backward()
    with torch.no_grad():
        return w - LR * w.grad


def _mp_step_fn(w_local: torch.nn.Parameter, x, target, ctx: DistContext):
    c = w_local.shape[0]

    def step():
        w_local.grad = None
        y_local = x @ w_local.t()
        full = _combine(y_local.detach(), ctx, "all_gather")
        # the local slice carries the autograd graph; the others are constants
        full = torch.cat([full[:, :ctx.rank * c], y_local, full[:, (ctx.rank + 1) * c:]], dim=1)
        nn.functional.mse_loss(full, target).backward()
        with torch.no_grad():
            w_local.sub_(LR * w_local.grad)
    return step


def _count_far(actual: torch.Tensor, expected: torch.Tensor) -> int:
    return int((~torch.isclose(actual, expected.to(actual.device), rtol=RTOL, atol=ATOL)).sum().item())


# --- one buffer set per case -----------------------------------------------------------------------

def _scatter_buffers(layer: Layer, ctx: DistContext) -> Buffers:
    c = _rows(layer, ctx)
    w_full = _ints((layer.out_features, layer.in_features), 1, ctx.device)
    src = w_full if ctx.rank == 0 else None
    got: list = [torch.empty(c, layer.in_features, device=ctx.device)]

    def call(a: bool):
        got[0] = _scatter_weight(src, layer, ctx)
    return Buffers(call=call, check=lambda: verify.count_wrong(got[0], w_full[ctx.rank * c:(ctx.rank + 1) * c]),
                   outputs=lambda: (got[0],))


def _forward_buffers(layer: Layer, ctx: DistContext, how: str) -> Buffers:
    c = _rows(layer, ctx)
    w_full = _ints((layer.out_features, layer.in_features), 1, ctx.device)
    x = _ints((layer.batch, layer.in_features), 2, ctx.device)
    w_local = w_full[ctx.rank * c:(ctx.rank + 1) * c].contiguous()
    expected = x @ w_full.t()
    full: list = [None]

    def call(a: bool):
        full[0] = _combine(x @ w_local.t(), ctx, how)
    return Buffers(call=call, check=lambda: verify.count_wrong(full[0], expected) if full[0] is not None else 0,
                   outputs=lambda: (full[0],) if full[0] is not None else ())


def _train_data(layer: Layer, ctx: DistContext):
    w0 = _randn((layer.out_features, layer.in_features), 3, ctx.device) * 0.02
    x = _randn((layer.batch, layer.in_features), 4, ctx.device)
    target = _randn((layer.batch, layer.out_features), 5, ctx.device)
    return w0, x, target, _reference_step(w0, x, target)


def _mp_train_buffers(layer: Layer, ctx: DistContext) -> Buffers:
    c, n = _rows(layer, ctx), ctx.world_size
    w0, x, target, expected = _train_data(layer, ctx)
    initial = w0[ctx.rank * c:(ctx.rank + 1) * c].clone()
    w = nn.Parameter(initial.clone())
    step = _mp_step_fn(w, x, target, ctx)

    def reset():
        with torch.no_grad():
            w.copy_(initial)

    def check() -> int:
        parts = [torch.empty_like(w.data) for _ in range(n)]
        dist.all_gather(parts, w.data, group=ctx.group)
        return _count_far(torch.cat(parts), expected)
    return Buffers(call=lambda a: step(), check=check, outputs=lambda: (w.detach(),), reset=reset)


def _dp_train_buffers(layer: Layer, ctx: DistContext) -> Buffers:
    n = ctx.world_size
    w0, x, target, expected = _train_data(layer, ctx)
    b = layer.batch // n
    xs, ts = x[ctx.rank * b:(ctx.rank + 1) * b], target[ctx.rank * b:(ctx.rank + 1) * b]
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
    return Buffers(call=step, check=lambda: _count_far(lin.weight.detach(), expected),
                   outputs=lambda: (lin.weight.detach(),), reset=reset)


# --- the cases --------------------------------------------------------------------------------------

def _with_samples_per_s(build, layer: Layer):
    """The train steps' buffers, plus samples_per_s derived from the timed median."""
    def with_rate(ctx: DistContext) -> Buffers:
        return dataclasses.replace(build(ctx), derive=lambda m, around, session: {
            "samples_per_s": layer.batch / m.median_s})
    return with_rate


def _not_divisible(layer: Layer):
    def skip(ctx: DistContext, cfg: BenchConfig) -> str | None:
        n = ctx.world_size
        if layer.out_features % n or layer.batch % n:
            return f"MP_OUT={layer.out_features} and MP_BATCH={layer.batch} must divide by the world size {n}"
        return None
    return skip


def model_parallel_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """The split layer's five ops (the knobs: MP_IN, MP_OUT, MP_BATCH)."""
    layer = cfg.model_parallel
    n = max(world_size, 1)
    w_bytes = layer.out_features * layer.in_features * 4
    y_bytes = layer.batch * layer.out_features * 4
    common = {"in_features": layer.in_features, "out_features": layer.out_features, "global_batch": layer.batch,
              "table": "model_parallel", "rows_per_rank": layer.out_features // n}
    train_check = f"one step equals the unsplit single-process step (rtol={RTOL}, atol={ATOL})"
    spec = {
        "scatter": (w_bytes, "scatter", "the whole weight (out x in x 4 B) rank 0 scatters",
                    lambda ctx: _scatter_buffers(layer, ctx), {"check": "exact rows of rank 0's weight"}),
        "mp_forward_all_gather": (y_bytes, "all_gather", "the whole output (B x out x 4 B)",
                                  lambda ctx: _forward_buffers(layer, ctx, "all_gather"),
                                  {"check": "exact: equals the unsplit x @ W.T on every rank"}),
        "mp_forward_gather": (y_bytes, "gather", "the whole output (B x out x 4 B)",
                              lambda ctx: _forward_buffers(layer, ctx, "gather"),
                              {"check": "exact: equals the unsplit x @ W.T on rank 0"}),
        "mp_train_step": (y_bytes, "all_gather", "the whole output (B x out x 4 B) all-gathered per step",
                          lambda ctx: _mp_train_buffers(layer, ctx), {"check": train_check, "grad_comm_bytes": 0}),
        "dp_train_step": (w_bytes, "all_reduce", "the whole weight gradient (out x in x 4 B) all-reduced per step",
                          lambda ctx: _dp_train_buffers(layer, ctx),
                          {"check": train_check, "grad_comm_bytes": w_bytes}),
    }
    out = []
    for op in OPS:
        size, bw_op, definition, build, fields = spec[op]
        train = op in ("mp_train_step", "dp_train_step")
        out.append(Case(experiment=EXPERIMENT, op=op, label=op, identity={"variant": op},
                        bytes=Bytes(size_bytes=size, count=size // 4, dtype="float32", bw_op=bw_op,
                                    definition=definition),
                        build=_with_samples_per_s(build, layer) if train else build, mode="blocking",
                        skip=_not_divisible(layer), fields={**common, **fields},
                        provenance={"samples_per_s": "derived: global_batch / time_us"} if train else {}))
    return out


test_model_parallel = experiment_test(model_parallel_cases)
