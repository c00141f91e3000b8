"""How far a rank's BatchNorm running stats may lie from the reference's after the timed steps, where the
parameters' rule is a tolerance (3 ranks and more): a bound derived from the parameters' own tolerance.

In training mode a BatchNorm normalises with the batch's own statistics, and each forward moves its running
stats by them: rm <- (1 - m) rm + m mean_j, rv <- (1 - m) rv + m var_j (unbiased), m the momentum. The
model's BatchNorm follows its first Linear (h = x W^T + b, models.mlp), so a rank's batch statistics differ
from the reference's only through that Linear's parameters, which differ by at most the rule's per-element
tolerance T after s steps (check.check_rule, suite/harness/sgd_rule.py's ``tol``), and through float32 rounding
once they differ:

- mean: |d mean_j| <= sum_k T_jk |xbar_k| + T_b_j (the mean is linear in W and b);
- variance (w C w^T, C the batch's covariance): |d var_j| <= sum_k T_jk M_jk + T_max^2 Q, with
  M_jk = 2/(B - 1) sum_i |hc_ij| |xc_ik| <= 2/(B - 1) sum_i |hc_ij| max_i |xc_ik| (hc, xc: h and x less
  their batch means) and Q = sum_i (sum_k |xc_ik|)^2 / (B - 1), the second-order term from the largest
  tolerance T_max;
- rounding, from the second step on (before it, every forward sees bit-identical parameters and inputs and
  rounds alike): h's dot products each err by at most gamma_(n+2) (sum_k |x_ik| |W_jk| + |b_j|) (n inputs,
  gamma_n = n u, u = 2^-24; in the variance's term with the batch's largest |x_ik|) on either side, the
  batch mean and variance sum B terms (gamma_(B+2)), and the running stats' update rounds on either side
  (2 x 2u ((1 - m) |rm| + m |mean_j| + |rm'|)).

Each forward's terms are taken from the reference (``Terms``), per rank and in the order the reference ran
them, with DDP's buffer broadcasts between (``BROADCAST``: every rank takes rank 0's, so its bound too); a
difference carried from earlier steps shrinks by (1 - m) per forward. ``tolerance`` replays them under a
rule: T = cg g + c1 + cp p per element (``SgdRule.coefficients``). The count of batches is compared exactly.
Models whose BatchNorm does not follow a Linear directly get no bound (``bn_after_linear`` is None): their
buffers are compared after the one-step check only, as before.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn

U32 = 2.0**-24
"""Unit roundoff of float32."""
BROADCAST = "broadcast"
"""An event of the reference: DDP's buffer broadcast (every rank takes rank 0's buffers)."""


def bn_after_linear(net: nn.Module) -> tuple[nn.Linear, nn.BatchNorm1d] | None:
    """The model's (Linear, BatchNorm1d) when its only BatchNorm directly follows its first Linear, with a
    momentum (not a cumulative average); None otherwise (no bound derived)."""
    if not isinstance(net, nn.Sequential) or len(net) < 2:
        return None
    norms = [
        m for m in net.modules() if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm))
    ]
    lin, bn = net[0], net[1]
    if not (isinstance(lin, nn.Linear) and isinstance(bn, nn.BatchNorm1d)) or norms != [bn] or bn.momentum is None:
        return None
    if lin.bias is None or not bn.track_running_stats:
        return None
    return lin, bn


@dataclasses.dataclass(frozen=True)
class Terms:
    """One forward of rank ``rank``'s batch, ``s`` optimizer steps in: what its batch statistics' bound is made
    of (per feature j, float64), apart from the rule's coefficients."""

    rank: int
    s: int
    g_largest: float
    """max|g| and max|p| over every element of the model so far (the rule's carried term)."""
    p_largest: float
    mean_g: torch.Tensor
    """sum_k G_jk |xbar_k|, G the Linear's per-element max|g| so far; ``mean_p`` the same with max|p|."""
    mean_p: torch.Tensor
    mean_1: float
    """sum_k |xbar_k|."""
    bias_g: torch.Tensor
    bias_p: torch.Tensor
    var_g: torch.Tensor
    """sum_k G_jk M_jk; ``var_p`` with max|p|, ``var_1`` sum_k M_jk."""
    var_p: torch.Tensor
    var_1: torch.Tensor
    q: float
    w_g_largest: float
    """The Linear's own largest max|g| and max|p| (its largest tolerance, for the second-order term)."""
    w_p_largest: float
    round_mean: torch.Tensor
    round_var: torch.Tensor
    rm_abs: torch.Tensor
    """|running mean| and |running var| after this forward (the update's rounding)."""
    rv_abs: torch.Tensor


def terms(
    rank: int,
    s: int,
    x: torch.Tensor,
    h: torch.Tensor,
    lin: nn.Linear,
    g_max: torch.Tensor,
    p_max: torch.Tensor,
    offset: int,
    largest: tuple[float, float],
) -> Terms:
    """The terms of rank ``rank``'s forward of batch ``x`` after ``s`` steps, ``h`` the BatchNorm's input it
    computed through ``lin``; ``g_max``, ``p_max``: the reference's per-element maxima over the whole flat
    parameters, ``lin``'s weight at ``offset`` (its bias right after), ``largest`` their largest elements.
    Each sum over a row's inputs is one matrix-vector product: M_jk is bounded by 2/(B - 1) sum_i |hc_ij|
    max_i |xc_ik|, each h_ij's rounding by the batch's largest |x_ik|. ``rm_abs``/``rv_abs`` are filled by
    ``after``."""
    w, b = lin.weight.detach(), lin.bias.detach()
    h_out, n = w.shape
    rows = x.shape[0]
    size = h_out * n
    gw, pw = g_max[offset : offset + size].view(h_out, n), p_max[offset : offset + size].view(h_out, n)
    gb, pb = g_max[offset + size : offset + size + h_out], p_max[offset + size : offset + size + h_out]
    x, h = x.detach(), h.detach().double()
    xc = x - x.mean(0)
    xbar, xc_max = x.mean(0).abs(), xc.abs().amax(0)
    hc_sum = (h - h.mean(0)).abs().sum(0)  # sum_i |hc_ij|
    k = 2.0 / (rows - 1)
    zero = torch.zeros(h_out, dtype=torch.float64)
    if s == 0:
        round_mean = round_var = zero
    else:
        gamma_n, gamma_b = (n + 2) * U32, (rows + 2) * U32
        wa, ba = w.abs(), b.abs().double()
        eps_mean = gamma_n * ((wa @ x.abs().mean(0)).double() + ba)
        eps_max = gamma_n * ((wa @ x.abs().amax(0)).double() + ba)
        round_mean = 2 * (eps_mean + gamma_b * h.abs().mean(0))
        round_var = 2 * (2 * k * eps_max * hc_sum + 2 * gamma_b * (h * h).sum(0) / (rows - 1))
    return Terms(
        rank=rank,
        s=s,
        g_largest=largest[0],
        p_largest=largest[1],
        mean_g=(gw @ xbar).double(),
        mean_p=(pw @ xbar).double(),
        mean_1=float(xbar.sum()),
        bias_g=gb.double(),
        bias_p=pb.double(),
        var_g=k * hc_sum * (gw @ xc_max).double(),
        var_p=k * hc_sum * (pw @ xc_max).double(),
        var_1=k * hc_sum * float(xc_max.sum()),
        q=float((xc.abs().sum(1).double() ** 2).sum() / (rows - 1)),
        w_g_largest=float(gw.max()),
        w_p_largest=float(pw.max()),
        round_mean=round_mean,
        round_var=round_var,
        rm_abs=zero,
        rv_abs=zero,
    )


def after(t: Terms, bn: nn.BatchNorm1d, before: list[torch.Tensor], h: torch.Tensor) -> Terms:
    """``t`` with what the running stats' update rounds, per element: (1 - m) |old| + m |batch stat| + |new|
    (``before``: the buffers the forward started from, ``h`` its input), which also covers an update whose
    two terms cancel."""
    m, h = float(bn.momentum), h.detach().double()
    rm_b, rv_b = before[0].double().abs(), before[1].double().abs()
    return dataclasses.replace(
        t,
        rm_abs=(1 - m) * rm_b + m * h.mean(0).abs() + bn.running_mean.detach().double().abs(),
        rv_abs=(1 - m) * rv_b + m * h.var(0) + bn.running_var.detach().double().abs(),
    )


def tolerance(events: list, world: int, rule, momentum: float) -> torch.Tensor:
    """Per rank (rows) and buffer element (the flat buffers: running mean, running var, the batch count), the
    largest difference from the reference's after ``events`` (the reference's forwards and broadcasts, in
    order) under ``rule`` (suite/harness/sgd_rule.py: ``coefficients``)."""
    mean: torch.Tensor | None = None
    var: torch.Tensor | None = None
    for ev in events:
        if ev == BROADCAST:
            if mean is not None and var is not None:
                mean, var = mean[0].expand_as(mean).clone(), var[0].expand_as(var).clone()
            continue
        if mean is None or var is None:
            mean = torch.zeros(world, ev.mean_g.numel(), dtype=torch.float64)
            var = torch.zeros_like(mean)
        if ev.s == 0:  # bit-identical parameters and inputs: the same statistics, rounded alike
            continue
        cg, c1, cp = rule.coefficients(ev.s, ev.g_largest, ev.p_largest)
        d_mean = cg * (ev.mean_g + ev.bias_g) + c1 * (ev.mean_1 + 1) + cp * (ev.mean_p + ev.bias_p)
        t_max = cg * ev.w_g_largest + c1 + cp * ev.w_p_largest
        d_var = cg * ev.var_g + c1 * ev.var_1 + cp * ev.var_p + t_max**2 * ev.q
        r = ev.rank
        mean[r] = (1 - momentum) * mean[r] + momentum * (d_mean + ev.round_mean) + 4 * U32 * ev.rm_abs
        var[r] = (1 - momentum) * var[r] + momentum * (d_var + ev.round_var) + 4 * U32 * ev.rv_abs
    if mean is None or var is None:
        return torch.zeros(world, 1, dtype=torch.float64)
    return torch.cat([mean, var, torch.zeros(world, 1, dtype=torch.float64)], dim=1)
