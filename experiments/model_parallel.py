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
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from suite import training, verify
from suite.config import BenchConfig
from suite.dist import DistContext
from suite.plugin import submit
from suite.results import make_record
from suite.timing import measure

EXPERIMENT = "model_parallel"
LR = 0.01
RTOL, ATOL = 1e-4, 1e-6


@dataclass(frozen=True, kw_only=True)
class Layer:
    """Shape of the split layer and the global batch."""

    in_features: int = 2048
    out_features: int = 2048
    batch: int = 64

    @classmethod
    def from_env(cls) -> Layer:
        return cls(in_features=training.env_size("MP_IN", cls.in_features),
                   out_features=training.env_size("MP_OUT", cls.out_features),
                   batch=training.env_size("MP_BATCH", cls.batch))


OPS = ("scatter", "mp_forward_all_gather", "mp_forward_gather", "mp_train_step", "dp_train_step")


def pytest_generate_tests(metafunc):
    if "mp_op" in metafunc.fixturenames:
        metafunc.parametrize("mp_op", OPS)


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


def _discard(_result) -> None:
    """The timing loop's op returns a Work or None; these ops complete synchronously."""
    return None


def _count_far(actual: torch.Tensor, expected: torch.Tensor) -> int:
    return int((~torch.isclose(actual, expected.to(actual.device), rtol=RTOL, atol=ATOL)).sum().item())


def test_model_parallel(mp_op: str, dist_ctx: DistContext, bench_cfg: BenchConfig, benchmark, request):
    ctx, cfg, layer = dist_ctx, bench_cfg, Layer.from_env()
    n = ctx.world_size
    if layer.out_features % n or layer.batch % n:
        pytest.skip(f"MP_OUT={layer.out_features} and MP_BATCH={layer.batch} must divide by the world size {n}")
    c = _rows(layer, ctx)
    w_bytes = layer.out_features * layer.in_features * 4
    y_bytes = layer.batch * layer.out_features * 4
    extra = {"in_features": layer.in_features, "out_features": layer.out_features, "global_batch": layer.batch,
             "table": "model_parallel"}

    if mp_op == "scatter":
        w_full = _ints((layer.out_features, layer.in_features), 1, ctx.device)
        got = _scatter_weight(w_full if ctx.rank == 0 else None, layer, ctx)
        n_wrong = verify.global_wrong(verify.count_wrong(got, w_full[ctx.rank * c:(ctx.rank + 1) * c]),
                                      ctx.group, ctx.device)
        src = w_full if ctx.rank == 0 else None
        m = measure(ctx, cfg, lambda a: _discard(_scatter_weight(src, layer, ctx)), mode="blocking")
        size, bw_op, extra["check"] = w_bytes, "scatter", "exact rows of rank 0's weight"
    elif mp_op in ("mp_forward_all_gather", "mp_forward_gather"):
        how = "gather" if mp_op == "mp_forward_gather" else "all_gather"
        w_full = _ints((layer.out_features, layer.in_features), 1, ctx.device)
        x = _ints((layer.batch, layer.in_features), 2, ctx.device)
        w_local = w_full[ctx.rank * c:(ctx.rank + 1) * c].contiguous()
        full = _combine(x @ w_local.t(), ctx, how)
        wrong = verify.count_wrong(full, x @ w_full.t()) if full is not None else 0
        n_wrong = verify.global_wrong(wrong, ctx.group, ctx.device)
        m = measure(ctx, cfg, lambda a: _discard(_combine(x @ w_local.t(), ctx, how)), mode="blocking")
        size, bw_op = y_bytes, how
        extra["check"] = "exact: equals the unsplit x @ W.T" + (" on rank 0" if how == "gather" else " on every rank")
    else:
        w0 = _randn((layer.out_features, layer.in_features), 3, ctx.device) * 0.02
        x = _randn((layer.batch, layer.in_features), 4, ctx.device)
        target = _randn((layer.batch, layer.out_features), 5, ctx.device)
        expected = _reference_step(w0, x, target)
        if mp_op == "mp_train_step":
            def fresh():
                return nn.Parameter(w0[ctx.rank * c:(ctx.rank + 1) * c].clone())
            checked = fresh()
            _mp_step_fn(checked, x, target, ctx)()
            parts = [torch.empty_like(checked.data) for _ in range(n)]
            dist.all_gather(parts, checked.data, group=ctx.group)
            n_wrong = verify.global_wrong(_count_far(torch.cat(parts), expected), ctx.group, ctx.device)
            timed = fresh()
            m = measure(ctx, cfg, lambda a: _mp_step_fn(timed, x, target, ctx)(), mode="blocking")
            size, bw_op = y_bytes, "all_gather"
            extra["grad_comm_bytes"] = 0
        else:
            b = layer.batch // n
            xs, ts = x[ctx.rank * b:(ctx.rank + 1) * b], target[ctx.rank * b:(ctx.rank + 1) * b]

            def fresh_ddp():
                lin = nn.Linear(layer.in_features, layer.out_features, bias=False).to(ctx.device)
                with torch.no_grad():
                    lin.weight.copy_(w0)
                kw = {"device_ids": [ctx.device.index]} if ctx.device.type == "cuda" else {}
                model = DDP(lin, process_group=ctx.group, **kw)
                return lin, model, torch.optim.SGD(model.parameters(), lr=LR)

            def step(model, opt):
                opt.zero_grad(set_to_none=False)
                nn.functional.mse_loss(model(xs), ts).backward()
                opt.step()
            lin, model, opt = fresh_ddp()
            step(model, opt)
            n_wrong = verify.global_wrong(_count_far(lin.weight.detach(), expected), ctx.group, ctx.device)
            _, model, opt = fresh_ddp()
            m = measure(ctx, cfg, lambda a: step(model, opt), mode="blocking")
            size, bw_op = w_bytes, "all_reduce"
            extra["grad_comm_bytes"] = w_bytes
        extra["check"] = f"one step equals the unsplit single-process step (rtol={RTOL}, atol={ATOL})"
        extra["samples_per_s"] = layer.batch / m.median_s
    rec = make_record(experiment=EXPERIMENT, op=mp_op, variant=mp_op, backend=ctx.backend, device=ctx.device.type,
                      dtype="float32", world_size=n, size_bytes=size, count=size // 4, in_place=False, m=m,
                      n_wrong=n_wrong, bw_op=bw_op, rows_per_rank=c, **extra)
    submit(request, benchmark, m, rec)


def check_environment() -> None:
    """Called by the launcher before any rank starts: a bad MP_* knob is exit 2, not a collection error."""
    layer = Layer.from_env()
    if min(layer.in_features, layer.out_features, layer.batch) < 1:
        raise ValueError(f"MP_IN, MP_OUT and MP_BATCH must be >= 1, got {layer}")
