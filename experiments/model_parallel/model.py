"""The pipeline schedules' analytic model: a schedule's time from one stage's compute c and one hop's
transfer tau, and the bubble, one definition for a measurement and a model."""

from __future__ import annotations

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
