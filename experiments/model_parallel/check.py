"""The train steps' check: the float64 unsplit reference step and the rule (exact or a derived bound) that
the split and data-parallel steps are held to."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from .settings import ModelParallelSettings

LR_EXP = 6


LR = 2.0**-LR_EXP
"""SGD learning rate of the train steps: a power of two, so scaling by it never rounds."""


VMAX = 2
"""Largest |value| of ``_ints`` (weights, inputs, targets of the exact checks)."""


U_FLOAT32, U_FLOAT64 = 2.0**-24, 2.0**-53
"""Unit roundoff of float32 (the steps) and float64 (the reference)."""


EXACT_FLOAT32 = 1 << 24
"""Every integer multiple k·2^e of a power of two with |k| <= 2^24 is exact in float32."""


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


def train_check_rule(layer: ModelParallelSettings, ranks: int, split: str) -> CheckRule:
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


def reference_step(w: torch.Tensor, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """One unsplit single-process SGD step of the layer in float64; returns the new weight."""
    w = w.double().clone().requires_grad_(True)
    nn.functional.mse_loss(x.double() @ w.t(), target.double()).backward()
    with torch.no_grad():
        return w - LR * w.grad
