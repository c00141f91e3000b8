"""Model parallelism as the source article describes it: one large linear layer split across ranks,
and a pipeline of stages (rank i -> i+1) with real work per stage.

**The split layer.** The weight ``W`` (out × in) lives on rank 0; ``scatter`` gives rank r the rows
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
  get their gradient from their own output slice.
- ``dp_train_step``: the same layer under DDP, the global batch split across ranks:
  the all_reduce carries the whole weight gradient (out·in·4 bytes) instead of the
  B·out·4 bytes of activations that model parallelism moves.

Both train steps are checked against one unsplit single-process step computed in float64 with the
rule of ``train_check_rule``: weights, inputs and targets are integers (−2..2) and the learning rate
is 2^-6, so where the MSE mean (and DDP's average over ranks) divides by a power of two and every
partial sum stays below 2^24, float32 computes the step exactly and the check is ``==``; otherwise
each element may differ by the forward error bound the rule derives from float32's unit roundoff and
the number of roundings behind it (recorded as ``check``, ``check_exact``, ``check_max_tolerance``).

**The pipeline.** S = world stages; stage s applies its layer ``y = x·W_s + 1`` to each micro-batch
(``MP_MICROBATCH_ROWS`` × ``MP_STAGE_FEATURES`` float32, defaults 128 × 512: a 512 × 512 matmul per
micro-batch, which on CPU Gloo costs about as long as sending the 256 KB micro-batch to the next
stage). ``W_s`` is a dense matrix holding a permutation, so the matmul does all its d² work per row
while the values stay small integers and the last stage's output is checked exactly against the
unsplit model (every layer applied in one process). Measured in the same run:

- ``pipeline_compute``: one stage's layer on one micro-batch, every rank at once (c);
- ``pipeline_transfer``: one micro-batch relayed 0 -> 1 -> ... -> S−1 with blocking send/recv and no
  compute, time per hop (τ = relay / (S−1));
- ``pipeline_blocking`` (M = 1, 2, 4, 8): GPipe fill/drain, forward only, over blocking send/recv;
- ``pipeline_overlap`` (M = 1, 2, 4, 8): the same with ``irecv`` of the next micro-batch posted before
  the current one's compute and ``isend`` of each result, so transfers overlap compute.

Each pipeline record carries its schedule's model (``pipeline_time_s``) evaluated at this run's c and
τ, and the bubble with one definition for the measurement, the model and the compute-only ideal:
``bubble = 1 − M·c / T``, the share of the pipeline time T a stage does not compute.

Every case is a declared ``suite.case.Case`` run by the harness (suite/runner.py). The train
steps restore the initial weight before each timed sample (``reset``), so the check after the
timed steps is the same one-step check. ``samples_per_s`` (train steps) = global batch / the
median of the case's own timed samples.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from suite.api import verify
from suite.api import Buffers, Bytes, Case, Session, experiment_test
from suite.api import BenchConfig
from suite.api import DistContext

from .settings import ModelParallelSettings

EXPERIMENT = "model_parallel"
LR_EXP = 6
LR = 2.0**-LR_EXP
"""SGD learning rate of the train steps: a power of two, so scaling by it never rounds."""
VMAX = 2
"""Largest |value| of ``_ints`` (weights, inputs, targets of the exact checks)."""
U_FLOAT32, U_FLOAT64 = 2.0**-24, 2.0**-53
"""Unit roundoff of float32 (the steps) and float64 (the reference)."""
EXACT_FLOAT32 = 1 << 24
"""Every integer multiple k·2^e of a power of two with |k| <= 2^24 is exact in float32."""


Layer = ModelParallelSettings
"""Shape of the split layer and the global batch: ``cfg.model_parallel`` (MP_IN, MP_OUT, MP_BATCH),
and of the pipeline stages (MP_STAGE_FEATURES, MP_MICROBATCH_ROWS)."""


OPS = ("scatter", "mp_forward_all_gather", "mp_forward_gather", "mp_train_step", "dp_train_step")
SCHEDULES = ("blocking", "overlap")
MICROBATCHES = (1, 2, 4, 8)


def _ints(shape: tuple[int, ...], salt: int, device) -> torch.Tensor:
    """Small integers −2..2 as float32: every product and sum of the layer is exact."""
    n = math.prod(shape)
    idx = torch.arange(n, dtype=torch.int64, device=device)
    return (((idx * 7 + salt * 13) % 5) - 2).to(torch.float32).reshape(shape)


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


# --- the train steps' check rule ------------------------------------------------------------------


def _pow2(v: int) -> bool:
    return v >= 1 and v & (v - 1) == 0


def _gamma(k: int, u: float) -> float:
    """Higham's γ_k = k·u / (1 − k·u): the relative error bound of k roundings in a row."""
    return k * u / (1 - k * u)


@dataclass(frozen=True)
class CheckRule:
    """How a train step is compared with the unsplit float64 step (recorded as ``check``)."""

    exact: bool
    """True: float32 computes the step without rounding, the check is ``==``."""
    ops: int
    """k: roundings in the longest chain behind one weight element (0 when exact)."""
    rule: str
    """The rule in words, with the reasons it is not exact where it is not."""


def train_check_rule(layer: Layer, ranks: int, split: str) -> CheckRule:
    """The check rule of one SGD step of the layer, ``split`` = "mp" (rows over ranks) or "dp" (DDP).

    Data: W0, x, target integers with |v| <= VMAX = 2; loss = mean squared error over N elements
    (N = B·out for "mp": every rank takes the mean over the whole output; N_l = (B/n)·out for "dp",
    whose DDP then divides each gradient by n and sums over ranks); w1 = W0 − LR·grad, LR = 2^-6.

    Exact when every value of the chain is an integer multiple of a power of two with at most 24
    significant bits: y = x·W0ᵀ and y − t are integers <= in·VMAX² + VMAX; the MSE backward scales
    them by 2/N (exact iff N is a power of two; for "dp" also the division by n); grad = (2/N)·Σ_b
    (y−t)_b·x_b has integer coefficients <= K = B·(in·VMAX² + VMAX)·VMAX; w1 in units of LR·2/N has
    the coefficient VMAX·(N/2)·2^6 + K. All of them <= 2^24: float32 rounds nothing.

    Otherwise each element of w1 may differ from the true step by the standard forward error bound of
    a chain of k roundings (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1):
    |Δw1| <= γ_k·LR·(2/N)·((|x|·|W0|ᵀ + |t|)ᵀ·|x|) + u·|w1|, with k = in (forward dot products) + B
    (the gradient's sum over the batch) + n (DDP's sum over ranks) + 4 (the scale 2/N, DDP's 1/n, LR,
    the update), u = 2^-24, plus the same γ_k with u = 2^-53 for the float64 reference.
    """
    b, i, o = layer.batch, layer.in_features, layer.out_features
    n = ranks if split == "dp" else 1
    mean_over = (b // ranks) * o if split == "dp" else b * o
    reasons = []
    if not _pow2(mean_over):
        reasons.append(f"the MSE mean divides by {mean_over}, not a power of two")
    if split == "dp" and not _pow2(ranks):
        reasons.append(f"DDP divides the gradient by {ranks} ranks, not a power of two")
    y_max = i * VMAX * VMAX + VMAX
    k_max = b * y_max * VMAX
    if max(y_max, k_max, VMAX * (b * o // 2) * 2**LR_EXP + k_max) > EXACT_FLOAT32:
        reasons.append(f"partial sums exceed 2^24 (MP_IN={i}, MP_OUT={o}, MP_BATCH={b})")
    if not reasons:
        return CheckRule(
            True,
            0,
            "exact: equals the unsplit single-process step bit for bit (integer-valued "
            "W0, x, target in float32, LR 2^-6, power-of-two mean: nothing rounds)",
        )
    k = i + b + n + 4
    return CheckRule(
        False,
        k,
        f"within the float32 forward error bound gamma_{k}*LR*(2/N)*((|x||W0|^T+|t|)^T|x|)"
        f" + u|w1| per element of the unsplit float64 step ({'; '.join(reasons)})",
    )


def train_tolerance(
    rule: CheckRule, w0: torch.Tensor, x: torch.Tensor, target: torch.Tensor, expected: torch.Tensor
) -> torch.Tensor:
    """Per-element tolerance (float64) of ``rule`` for the step from ``w0`` on (x, target); zeros if exact."""
    if rule.exact:
        return torch.zeros_like(expected)
    ax, aw, at = x.double().abs(), w0.double().abs(), target.double().abs()
    gamma = _gamma(rule.ops, U_FLOAT32) + _gamma(rule.ops, U_FLOAT64)
    return gamma * LR * (2.0 / target.numel()) * ((ax @ aw.t() + at).t() @ ax) + U_FLOAT32 * expected.abs()


def count_outside(actual: torch.Tensor, expected: torch.Tensor, tol: torch.Tensor) -> int:
    """Elements with |actual − expected| > tol (a NaN is always outside)."""
    if actual.shape != expected.shape:
        return max(actual.numel(), expected.numel())
    inside = (actual.detach().double() - expected.to(actual.device)).abs() <= tol.to(actual.device)
    return int((~inside).sum().item())


def _reference_step(w: torch.Tensor, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """One unsplit single-process SGD step of the layer in float64; returns the new weight."""
    w = w.double().clone().requires_grad_(True)
    nn.functional.mse_loss(x.double() @ w.t(), target.double()).backward()
    with torch.no_grad():
        return w - LR * w.grad


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


def _scatter_buffers(layer: Layer, ctx: DistContext) -> Buffers:
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


def _forward_buffers(layer: Layer, ctx: DistContext, how: str) -> Buffers:
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


def _train_data(layer: Layer, ctx: DistContext, split: str):
    """W0, x, target (integers −2..2), the float64 unsplit step, its rule and per-element tolerance."""
    w0 = _ints((layer.out_features, layer.in_features), 3, ctx.device)
    x = _ints((layer.batch, layer.in_features), 4, ctx.device)
    target = _ints((layer.batch, layer.out_features), 5, ctx.device)
    expected = _reference_step(w0, x, target)
    rule = train_check_rule(layer, ctx.world_size, split)
    tol = train_tolerance(rule, w0, x, target, expected)
    return w0, x, target, expected, rule, tol


def _rule_fields(tol: torch.Tensor) -> dict:
    return {"check_max_tolerance": float(tol.max().item()) if tol.numel() else 0.0}


def _mp_train_buffers(layer: Layer, ctx: DistContext) -> Buffers:
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


def _dp_train_buffers(layer: Layer, ctx: DistContext) -> Buffers:
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

PIPELINE_MODELS = {
    "blocking": "GPipe fill/drain, forward only, over blocking send/recv (a transfer occupies sender and "
    "receiver): T = S*c + (S-1)*tau + (M-1)*(c + min(2, S-1)*tau)",
    "overlap": "GPipe fill/drain, forward only, isend/irecv overlapping each transfer with the next "
    "micro-batch's compute (a transfer needs no stage CPU, one at a time per link): "
    "T = S*c + (S-1)*tau + (M-1)*max(c, tau)",
}
"""The model of each schedule, as recorded (``pipeline_time_s`` evaluates it)."""


def pipeline_time_s(schedule: str, stages: int, microbatches: int, compute_s: float, transfer_s: float) -> float:
    """Modelled time T of M micro-batches through S stages, c compute per micro-batch per stage and
    τ per transfer of one micro-batch over one hop.

    Both schedules: the first micro-batch reaches the end after S computes and S−1 hops (fill:
    S·c + (S−1)·τ, nothing can overlap for it); each further one leaves the last stage one period p
    later (steady state), so T = S·c + (S−1)·τ + (M−1)·p.

    ``blocking`` (recv, compute, send, each blocking): a transfer occupies both its sender and its
    receiver for τ. A middle stage per micro-batch receives (τ), computes (c) and sends (τ) one after
    the other: p = c + 2τ; with S = 2 each stage does one transfer per micro-batch: p = c + τ; S = 1:
    p = c. Hand check, S = 3, M = 2: stage 0 computes [0, c], sends [c, c+τ]; stage 1 computes
    [c+τ, 2c+τ], sends to stage 2 [2c+τ, 2c+2τ]; only then receives micro-batch 1 [2c+2τ, 2c+3τ],
    computes [2c+3τ, 3c+3τ], sends [3c+3τ, 3c+4τ]; stage 2 computes it until 4c+4τ = 3c+2τ+(c+2τ).

    ``overlap`` (irecv of the next micro-batch posted before computing the current one, isend of each
    result, waits only for what is needed next): transfers run beside compute, so a stage starts a
    micro-batch as soon as it has arrived and its previous one is done, and a link carries one
    micro-batch per τ: p = max(c, τ) (S = 1: p = c).

    With τ = 0 both give the compute-only GPipe T = (M + S − 1)·c, whose bubble is (S−1)/(M+S−1).
    """
    if schedule not in PIPELINE_MODELS:
        raise ValueError(f"unknown pipeline schedule {schedule!r}; known: {', '.join(PIPELINE_MODELS)}")
    s, m, c, tau = stages, microbatches, compute_s, transfer_s
    if s < 1 or m < 1 or c < 0 or tau < 0:
        raise ValueError(f"need stages, microbatches >= 1 and times >= 0, got {s}, {m}, {c}, {tau}")
    if s == 1:
        period = c
    elif schedule == "blocking":
        period = c + min(2, s - 1) * tau
    else:
        period = max(c, tau)
    return s * c + (s - 1) * tau + (m - 1) * period


def pipeline_bubble(microbatches: int, compute_s: float, time_s: float) -> float:
    """Share of T during which a stage does not compute: 1 − M·c / T (the one bubble definition)."""
    return 1.0 - microbatches * compute_s / time_s if time_s > 0 else 0.0


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


def _microbatch(pipe: Layer, j: int, device) -> torch.Tensor:
    return _ints((pipe.microbatch_rows, pipe.stage_features), 10 + j, device)


def _pipeline_buffers(pipe: Layer, ctx: DistContext, m: int, schedule: str) -> Buffers:
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
    gave a c that T exceeded 2-3x at M >= 4 in every run of review_verification_2.md)."""
    return max(MICROBATCHES) + max(stages, 1) - 1


def _compute_buffers(pipe: Layer, ctx: DistContext, repeats: int = 1) -> Buffers:
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


def _relay_buffers(pipe: Layer, ctx: DistContext, repeats: int = 1) -> Buffers:
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


def _stage_keys(pipe: Layer, ctx: DistContext) -> tuple:
    shape = (id(ctx.group), pipe.microbatch_rows, pipe.stage_features)
    return tuple((EXPERIMENT, what, *shape) for what in ("compute", "hop", "relay", "computes"))


def _stage_times_s(pipe: Layer, ctx: DistContext, session: Session) -> tuple[float, float]:
    """(c, τ) of this run: the pipeline_compute / pipeline_transfer cases' own medians when they ran
    before (the declared order), else one blocking run of the same calls by the harness's timing loop."""
    kc, khop, krelay, kcomputes = _stage_keys(pipe, ctx)
    k = stage_repeats(ctx.world_size)
    c = session.once(
        kc, lambda: session.baseline(kcomputes, ctx, lambda: _compute_buffers(pipe, ctx, k).call).scaled(k)
    ).median_s
    hop = session.once(
        khop,
        lambda: session.baseline(krelay, ctx, lambda: _relay_buffers(pipe, ctx, k).call).scaled(
            k * (ctx.world_size - 1)
        ),
    )
    return c, hop.median_s


def _pipeline_fields(pipe: Layer, ctx: DistContext, m: int, schedule: str, meas, session: Session) -> dict:
    c, tau = _stage_times_s(pipe, ctx, session)
    n, t = ctx.world_size, meas.median_s
    model = pipeline_time_s(schedule, n, m, c, tau)
    return {
        "stage_compute_us": c * 1e6,
        "transfer_us": tau * 1e6,
        "model_time_us": model * 1e6,
        "time_over_model": t / model if model > 0 else None,
        "model_holds": model > 0 and abs(t / model - 1) <= MODEL_HOLDS_WITHIN,
        "bubble": pipeline_bubble(m, c, t),
        "model_bubble": pipeline_bubble(m, c, model),
        "ideal_bubble": pipeline_bubble(m, c, pipeline_time_s(schedule, n, m, c, 0.0)),
    }


MODEL_HOLDS_WITHIN = 0.25
"""A schedule's model holds for a run when the measured T is within ±25% of it (``model_holds``); beyond,
the model does not describe what ran (cores shared by more stages than the model assumes, a transfer
that needs the CPU it computes on) and its bubble is not the run's."""

PIPELINE_PROVENANCE = {
    "stage_compute_us": "measured: median of pipeline_compute in this run (a sample: one stage's layer on one "
    "micro-batch, stage_repeats times back to back, every rank at once, divided by stage_repeats; the harness's "
    "blocking loop on the same call if that case did not run)",
    "transfer_us": "measured: median of pipeline_transfer in this run (a sample: one micro-batch relayed through "
    "the stages with blocking send/recv, stage_repeats times back to back, divided by stage_repeats x (S-1) hops)",
    "model_time_us": "modelled: the schedule's `model` at c = stage_compute_us, tau = transfer_us",
    "time_over_model": "derived: time_us / model_time_us",
    "model_holds": "derived: |time_over_model - 1| <= MODEL_HOLDS_WITHIN (0.25)",
    "bubble": "derived: 1 - M * stage_compute_us / time_us",
    "model_bubble": "modelled: 1 - M * stage_compute_us / model_time_us",
    "ideal_bubble": "modelled: 1 - M*c / T with tau = 0 (compute-only GPipe) = (S-1)/(M+S-1)",
}


def _one_stage_each(ctx: DistContext, cfg: BenchConfig) -> str | None:
    return "the pipeline needs at least 2 ranks (one stage each)" if ctx.world_size < 2 else None


def pipeline_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """c and τ alone, then both schedules for M = 1, 2, 4, 8 (knobs: MP_STAGE_FEATURES, MP_MICROBATCH_ROWS)."""
    pipe = cfg.model_parallel
    n = max(world_size, 1)
    mb = pipe.microbatch_rows * pipe.stage_features * 4
    k = stage_repeats(n)
    common = {
        "table": "pipeline",
        "stages": n,
        "stage_features": pipe.stage_features,
        "microbatch_rows": pipe.microbatch_rows,
        "microbatch_bytes": mb,
    }

    def offering(build, offer):
        """``build``'s buffers, whose own timed Measurement is offered as c or τ to the pipeline cases."""

        def with_offer(ctx: DistContext) -> Buffers:
            def derive(m, around, session: Session) -> dict:
                offer(ctx, session, m)
                return {}

            return dataclasses.replace(build(ctx), derive=derive)

        return with_offer

    out = [
        Case(
            experiment=EXPERIMENT,
            op="pipeline_compute",
            label="pipeline_compute",
            identity={"variant": "pipeline_compute"},
            bytes=Bytes(
                size_bytes=0, count=0, dtype="float32", bw_op=None, definition="none: one stage's matmul, no bytes move"
            ),
            build=offering(
                lambda ctx: _compute_buffers(pipe, ctx, k),
                lambda ctx, session, m: session.once(_stage_keys(pipe, ctx)[0], lambda: m),
            ),
            mode="blocking",
            skip=_one_stage_each,
            divisor=k,
            normalisation=f"{k} stage computes back to back (stage_repeats) / {k}: one stage's compute",
            fields={**common, "stage_repeats": k, "check": "exact: x W_s + 1 equals the column roll of x plus 1"},
        ),
        Case(
            experiment=EXPERIMENT,
            op="pipeline_transfer",
            label="pipeline_transfer",
            identity={"variant": "pipeline_transfer"},
            bytes=Bytes(
                size_bytes=mb,
                count=mb // 4,
                dtype="float32",
                bw_op="send_recv",
                definition="one micro-batch (rows x d x 4 B) over one hop",
            ),
            build=offering(
                lambda ctx: _relay_buffers(pipe, ctx, k),
                lambda ctx, session, m: session.once(_stage_keys(pipe, ctx)[1], lambda: m),
            ),
            mode="blocking",
            skip=_one_stage_each,
            divisor=k * max(n - 1, 1),
            normalisation=f"{k} relays through {n} stages back to back (stage_repeats) / ({k} x {max(n - 1, 1)} "
            "hops): time of one hop",
            fields={**common, "stage_repeats": k, "check": "exact: the last stage receives stage 0's micro-batch"},
        ),
    ]
    for schedule in SCHEDULES:
        for m in MICROBATCHES:
            out.append(
                Case(
                    experiment=EXPERIMENT,
                    op=f"pipeline_{schedule}",
                    label=f"pipeline_{schedule}-M{m}",
                    identity={"variant": f"pipeline_{schedule}", "microbatches": m},
                    bytes=Bytes(
                        size_bytes=m * mb,
                        count=m * mb // 4,
                        dtype="float32",
                        bw_op="send_recv",
                        definition="micro-batches x micro-batch bytes (what each hop carries)",
                        time_includes="every stage's matmul of every micro-batch",
                    ),
                    build=lambda ctx, m=m, schedule=schedule: dataclasses.replace(
                        _pipeline_buffers(pipe, ctx, m, schedule),
                        derive=lambda meas, around, session: _pipeline_fields(pipe, ctx, m, schedule, meas, session),
                    ),
                    mode="blocking",
                    skip=_one_stage_each,
                    normalisation="none: time of the whole pipeline (M micro-batches through S stages)",
                    fields={
                        **common,
                        "schedule": schedule,
                        "model": PIPELINE_MODELS[schedule],
                        "check": "exact: the last stage's outputs equal the unsplit model's (every layer in one "
                        "process)",
                    },
                    provenance=PIPELINE_PROVENANCE,
                )
            )
    return out


# --- the cases --------------------------------------------------------------------------------------


def _with_samples_per_s(build, layer: Layer):
    """The train steps' buffers, plus samples_per_s derived from the timed median."""

    def with_rate(ctx: DistContext) -> Buffers:
        return dataclasses.replace(
            build(ctx), derive=lambda m, around, session: {"samples_per_s": layer.batch / m.median_s}
        )

    return with_rate


def _not_divisible(layer: Layer):
    def skip(ctx: DistContext, cfg: BenchConfig) -> str | None:
        n = ctx.world_size
        if layer.out_features % n or layer.batch % n:
            return f"MP_OUT={layer.out_features} and MP_BATCH={layer.batch} must divide by the world size {n}"
        return None

    return skip


TIME_INCLUDES = {
    "mp_forward_all_gather": "each rank's matmul of its rows",
    "mp_forward_gather": "each rank's matmul of its rows",
    "mp_train_step": "forward, backward and the SGD update",
    "dp_train_step": "forward, backward and the SGD update",
}
"""The compute inside the timed call of each split-layer op (scatter moves data only): their
bandwidths are effective rates (suite.case.Bytes.time_includes)."""

TRAIN_PROVENANCE = {
    "samples_per_s": "derived: global_batch / time_us",
    "check_max_tolerance": "modelled: largest per-element float32 forward error bound of the step "
    "(train_check_rule; 0 where the step is exact)",
}


def model_parallel_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """The split layer's five ops (the knobs: MP_IN, MP_OUT, MP_BATCH), then the pipeline's cases."""
    layer = cfg.model_parallel
    n = max(world_size, 1)
    w_bytes = layer.out_features * layer.in_features * 4
    y_bytes = layer.batch * layer.out_features * 4
    common = {
        "in_features": layer.in_features,
        "out_features": layer.out_features,
        "global_batch": layer.batch,
        "table": "model_parallel",
        "rows_per_rank": layer.out_features // n,
    }

    def train_fields(split: str, grad_bytes: int) -> dict:
        rule = train_check_rule(layer, n, split)
        return {
            "check": rule.rule,
            "check_exact": rule.exact,
            "check_rounding_ops": rule.ops,
            "learning_rate": LR,
            "grad_comm_bytes": grad_bytes,
        }

    spec = {
        "scatter": (
            w_bytes,
            "scatter",
            "the whole weight (out x in x 4 B) rank 0 scatters",
            lambda ctx: _scatter_buffers(layer, ctx),
            {"check": "exact rows of rank 0's weight"},
        ),
        "mp_forward_all_gather": (
            y_bytes,
            "all_gather",
            "the whole output (B x out x 4 B)",
            lambda ctx: _forward_buffers(layer, ctx, "all_gather"),
            {"check": "exact: equals the unsplit x @ W.T on every rank"},
        ),
        "mp_forward_gather": (
            y_bytes,
            "gather",
            "the whole output (B x out x 4 B)",
            lambda ctx: _forward_buffers(layer, ctx, "gather"),
            {"check": "exact: equals the unsplit x @ W.T on rank 0"},
        ),
        "mp_train_step": (
            y_bytes,
            "all_gather",
            "the whole output (B x out x 4 B) all-gathered per step",
            lambda ctx: _mp_train_buffers(layer, ctx),
            train_fields("mp", 0),
        ),
        "dp_train_step": (
            w_bytes,
            "all_reduce",
            "the whole weight gradient (out x in x 4 B) all-reduced per step",
            lambda ctx: _dp_train_buffers(layer, ctx),
            train_fields("dp", w_bytes),
        ),
    }
    out = []
    for op in OPS:
        size, bw_op, definition, build, fields = spec[op]
        train = op in ("mp_train_step", "dp_train_step")
        bytes_ = Bytes(
            size_bytes=size,
            count=size // 4,
            dtype="float32",
            bw_op=bw_op,
            definition=definition,
            time_includes=TIME_INCLUDES.get(op),
        )
        out.append(
            Case(
                experiment=EXPERIMENT,
                op=op,
                label=op,
                identity={"variant": op},
                bytes=bytes_,
                build=_with_samples_per_s(build, layer) if train else build,
                mode="blocking",
                skip=_not_divisible(layer),
                fields={**common, **fields},
                provenance=TRAIN_PROVENANCE if train else {},
            )
        )
    return out + pipeline_cases(cfg, world_size)


test_model_parallel = experiment_test(model_parallel_cases)
