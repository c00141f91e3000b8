"""ETTR under failures, modelled: the effective training time ratio (productive training time over wall time) of
a job whose failures arrive as a Poisson process, from its measured costs. Pure logic, no torch.

Inputs (seconds): C the checkpoint save cost (the time training stalls per checkpoint), R the restart cost per
failure (detection, restart, checkpoint load: the time to recover less its one step), the cost of a step,
tau the checkpoint interval (training time between checkpoints), M the job's mean time between failures
(``job_mtbf_s`` scales it from a per-node MTTF: N nodes fail N times as often).

- ``young_interval`` — sqrt(2 C M): J. W. Young, "A first order approximation to the optimum checkpoint
  interval", CACM 17(9), 1974.
- ``daly_interval`` — J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart
  dumps", FGCS 22(3), 2006: sqrt(2 C M)·[1 + ⅓·sqrt(C/2M) + ⅑·(C/2M)] − C for C < 2M, else M.
- ``exact_ettr`` — Daly's complete model (the cost function of the same paper): failures strike during
  training, writing and recovery alike, a segment of tau + C completes in M·e^(R/M)·(e^((tau+C)/M) − 1)
  on average, so ETTR = tau / (M·e^(R/M)·(e^((tau+C)/M) − 1)). ``best_interval`` is its exact maximum,
  tau* = M·(1 + W0(−e^(−C/M − 1))) (W0 the principal branch of Lambert's W; setting its derivative to zero).
- ``first_order_ettr`` — the first-order budget Young's interval minimises: each tau of training pays C,
  each failure loses tau/2 of training on average plus R: ETTR ≈ 1 − C/tau − (tau/2 + R)/M.
- ``meta_ettr`` — Meta's analytical estimator: A. Kokolis, M. Kuchnik et al., "Revisiting Reliability in
  Large-Scale Machine Learning Research Clusters", HPCA 2025 (arXiv 2410.21680). The research notes
  this module was written from do not quote its formula, and the paper's equations were not at hand: the
  form here is derived from the estimator's inputs as the paper names them (a job of N nodes failing at
  r_f per node, each failure costing the restart overhead u0 plus the work since the last checkpoint, on
  average half the interval Δt_cp): E[ETTR] ≈ 1 − N·r_f·(u0 + Δt_cp/2), i.e. 1 − (R + tau/2)/M.
  It has no checkpoint-write term.
- ``live_ettr`` — live recovery (torchft: no checkpoint rollback, the healthy peers keep the state): the
  complete model with tau one step and C the per-step overhead; a failure loses the step in flight and
  R = detection + recovery (+ any further steps in flight). It reduces to e^(−R/M) as the step shrinks.

``validate(records)`` sets each run's measured ETTR beside the model's (the 10% bar);
``extrapolation`` gives the best interval and ETTR per strategy at published scales;
``python -m suite.model.ettr_cli`` (make ettr) prints both (docs/recovery.md, "ETTR: the model"), and the
Monte-Carlo check of the closed forms (suite/model/ettr_sim.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BAR = 0.10
"""A prediction within 10% of the measured ETTR passes."""
BYTEROBUST_ETTR = 0.97
"""ByteRobust (arXiv 2509.16293): 97% ETTR over 3 months on 9,600 GPUs."""
META_MTTF_H = {1024: 7.9, 16384: 1.8}
"""Meta (arXiv 2410.21680), as cited by Clockwork: job MTTF (hours) at 1,024 and 16,384 GPUs."""
LIVE_WORDS = ("torchft", "live")
"""Records written before they carried the ``heals_from_peer`` trait: a strategy whose name holds one of these
recovers live (no checkpoint rollback)."""


_POSITIVE = ("tau_s", "mtbf_s", "step_s")


def _check(**values: float) -> None:
    """Each value finite; the interval, the MTBF and the step positive, every cost >= 0."""
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
        if v < 0 or (v == 0 and name in _POSITIVE):
            raise ValueError(f"{name} must be {'positive' if name in _POSITIVE else '>= 0'}, got {v!r}")


def job_mtbf_s(node_mttf_s: float, ranks: int, ranks_per_node: int = 1) -> float:
    """The job's mean time between failures: independent nodes, each failing at 1/node_mttf_s."""
    if ranks < 1 or ranks_per_node < 1 or ranks % ranks_per_node:
        raise ValueError(f"ranks={ranks} must be a positive multiple of ranks_per_node={ranks_per_node}")
    _check(mtbf_s=node_mttf_s)
    return node_mttf_s / (ranks // ranks_per_node)


def young_interval(ckpt_s: float, mtbf_s: float) -> float:
    _check(ckpt_s=ckpt_s, mtbf_s=mtbf_s)
    return math.sqrt(2.0 * ckpt_s * mtbf_s)


def daly_interval(ckpt_s: float, mtbf_s: float) -> float:
    _check(ckpt_s=ckpt_s, mtbf_s=mtbf_s)
    if ckpt_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = ckpt_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * ckpt_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - ckpt_s


def _lambert_w0(x: float) -> float:
    """The principal branch of Lambert's W for -1/e <= x < 0 (Halley's iteration)."""
    if not -1.0 / math.e <= x < 0:
        raise ValueError(f"W0 here takes -1/e <= x < 0, got {x}")
    p2 = 2.0 * (math.e * x + 1.0)
    if p2 <= 0:
        return -1.0
    p = math.sqrt(p2)  # the branch-point series (Corless et al. 1996, eq. 4.22) starts the iteration
    w = -1.0 + p - p2 / 3.0 + 11.0 / 72.0 * p * p2 if x < -0.25 else x
    for _ in range(60):
        ew = math.exp(w)
        f = w * ew - x
        if w == -1.0:
            break
        step = f / (ew * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0))
        w -= step
        if abs(step) <= 1e-15 * max(1.0, abs(w)):
            break
    return w


def best_interval(ckpt_s: float, mtbf_s: float) -> float:
    """The tau that maximises ``exact_ettr`` (R only scales it, so it does not move the optimum)."""
    _check(ckpt_s=ckpt_s, mtbf_s=mtbf_s)
    if ckpt_s == 0:
        return 0.0
    return mtbf_s * (1.0 + _lambert_w0(-math.exp(-ckpt_s / mtbf_s - 1.0)))


def exact_ettr(tau_s: float, ckpt_s: float, restart_s: float, mtbf_s: float) -> float:
    _check(tau_s=tau_s, ckpt_s=ckpt_s, restart_s=restart_s, mtbf_s=mtbf_s)
    return tau_s / (mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1((tau_s + ckpt_s) / mtbf_s))


def first_order_ettr(tau_s: float, ckpt_s: float, restart_s: float, mtbf_s: float) -> float:
    _check(tau_s=tau_s, ckpt_s=ckpt_s, restart_s=restart_s, mtbf_s=mtbf_s)
    return max(0.0, 1.0 - ckpt_s / tau_s - (tau_s / 2.0 + restart_s) / mtbf_s)


def meta_ettr(tau_s: float, restart_s: float, mtbf_s: float) -> float:
    _check(tau_s=tau_s, restart_s=restart_s, mtbf_s=mtbf_s)
    return max(0.0, 1.0 - (restart_s + tau_s / 2.0) / mtbf_s)


def live_ettr(step_s: float, loss_s: float, mtbf_s: float, overhead_s: float = 0.0) -> float:
    """ETTR of live recovery: a failure costs ``loss_s`` (detection + recovery) and the step in flight."""
    _check(step_s=step_s, loss_s=loss_s, mtbf_s=mtbf_s, overhead_s=overhead_s)
    return exact_ettr(step_s, overhead_s, loss_s, mtbf_s)


def is_live(rec: dict) -> bool:
    """Whether a run record's strategy recovers live (heals from a peer, no checkpoint rollback): its
    ``heals_from_peer`` trait, which the recovery experiment writes in every record (experiments/recovery/plan.py
    STRATEGIES); a record from before the trait was written is read by its strategy's name (LIVE_WORDS)."""
    trait = rec.get("heals_from_peer")
    if isinstance(trait, bool):
        return trait
    return any(w in str(rec.get("strategy", "")).lower() for w in LIVE_WORDS)


# ---- measured runs against the model ----


@dataclass(frozen=True, kw_only=True)
class Row:
    """One run's measured ETTR beside the model's."""

    strategy: str
    fault: str
    mtbf_s: float | None
    """The schedule's mean time between failures (None: planned faults, no rate)."""
    failures: int
    """Failures the run saw; the model is fed the rate it saw, wall_s / failures."""
    restart_s: float
    """R: the mean time to recover (fault -> the first step committed after it) less that one step."""
    measured: float
    predicted: float
    """The complete model (``exact_ettr``, ``live_ettr`` for live recovery) at the rate the run saw."""
    at_schedule: float | None
    """The same model at the schedule's MTBF (Poisson spread of the failure count included)."""
    first_order: float | None
    meta: float | None
    error: float
    """predicted / measured - 1."""
    ok: bool
    """|error| <= BAR."""


def _field(rec: dict, i: int, name: str) -> float:
    v = rec.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        run = f"record {i} ({rec.get('strategy')}, {rec.get('fault')})"
        raise ValueError(f"{run}: {name} must be a number >= 0, got {v!r}")
    return float(v)


def _mean(v) -> float | None:
    if isinstance(v, (list, tuple)):
        return sum(v) / len(v) if v else None
    return v


def failures_seen(rec: dict) -> int:
    """``n_faults``, else the faults of ``t_fault`` (a list) or of ``events`` (kind 'fault', one per time)."""
    if isinstance(rec.get("n_faults"), int):
        return rec["n_faults"]
    if isinstance(rec.get("t_fault"), (list, tuple)):
        return len(rec["t_fault"])
    times = {e.get("t") for e in rec.get("events") or () if isinstance(e, dict) and e.get("kind") == "fault"}
    if times:
        return len(times)
    return 1 if rec.get("t_fault") is not None or rec.get("t_recover") is not None else 0


def _row(rec: dict, i: int) -> Row:
    step_s, wall_s, measured = (_field(rec, i, k) for k in ("step_s_clean", "wall_s", "ettr"))
    live = is_live(rec)
    failures = failures_seen(rec)
    # the first step committed after a fault is a step of training (elastic: the first of the work redone, which
    # the model counts apart; live: the step in flight, run again), not part of the restart
    t_recover = _mean(rec.get("t_recover")) or 0.0
    restart_s = max(0.0, t_recover - step_s) if failures else 0.0
    ckpt_s = 0.0 if live else _field(rec, i, "ckpt_save_s")
    tau_s = step_s * (1 if live else _field(rec, i, "ckpt_every"))
    if step_s <= 0 or tau_s <= 0 or measured <= 0:
        raise ValueError(f"record {i}: step_s_clean, ckpt_every and ettr must be positive")
    plan = rec.get("mtbf_s") or None

    def model(mtbf_s: float | None) -> float:
        if not mtbf_s or math.isinf(mtbf_s):
            return tau_s / (tau_s + ckpt_s)
        return exact_ettr(tau_s, ckpt_s, restart_s, mtbf_s)

    seen = wall_s / failures if failures else None
    predicted = model(seen)
    error = predicted / measured - 1.0
    return Row(
        strategy=str(rec.get("strategy")),
        fault=str(rec.get("fault")),
        mtbf_s=plan,
        failures=failures,
        restart_s=restart_s,
        measured=measured,
        predicted=predicted,
        at_schedule=model(plan) if plan else None,
        first_order=None if live or not seen else first_order_ettr(tau_s, ckpt_s, restart_s, seen),
        meta=None if live or not seen else meta_ettr(tau_s, restart_s, seen),
        error=error,
        ok=abs(error) <= BAR,
    )


def validate(records: list[dict]) -> list[Row]:
    """Each run record (the recovery experiment's: strategy, fault, wall_s, ettr, ckpt_save_s, t_recover,
    steps_redone, step_s_clean, mtbf_s, ckpt_every) -> its measured and predicted ETTR and the error."""
    return [_row(rec, i) for i, rec in enumerate(records)]


def rates_within_bar(rows: list[Row]) -> list[float]:
    """The schedule MTBFs at which every run is within the bar (the model holds at >= 3 of them)."""
    rates = sorted({r.mtbf_s for r in rows if r.mtbf_s})
    return [m for m in rates if all(r.ok for r in rows if r.mtbf_s == m)]


# ---- extrapolation to published scales ----


@dataclass(frozen=True, kw_only=True)
class Point:
    """One strategy at one scale: its best checkpoint interval and the ETTR it reaches there."""

    ranks: int
    mtbf_s: float
    strategy: str
    young_s: float | None
    daly_s: float | None
    best_s: float | None
    """``best_interval``, rounded to whole steps when the step is known (None: live recovery)."""
    ettr: float
    meta: float | None


def extrapolation(
    scales: dict[int, float],
    *,
    ckpt_s: float,
    restart_s: float,
    async_ckpt_s: float | None = None,
    live_loss_s: float | None = None,
    step_s: float | None = None,
    live_overhead_s: float = 0.0,
) -> list[Point]:
    """Per scale (ranks -> job MTBF, s) and strategy, costs held flat in scale: checkpoint/restart with a
    synchronous save (C = ckpt_s), with an asynchronous one (C = async_ckpt_s, the stall it leaves), and live
    recovery (a failure costs live_loss_s and the step in flight; needs step_s)."""
    if live_loss_s is not None and not step_s:
        raise ValueError("live recovery needs the step's cost (step_s)")
    strategies = [("checkpoint/restart, sync save", ckpt_s)]
    if async_ckpt_s is not None:
        strategies.append(("checkpoint/restart, async save", async_ckpt_s))
    out = []
    for ranks, mtbf_s in sorted(scales.items()):
        at = dict(ranks=ranks, mtbf_s=mtbf_s)
        for name, c in strategies:
            best = best_interval(c, mtbf_s)
            if step_s:
                best = max(1, round(best / step_s)) * float(step_s)
            if best <= 0:
                raise ValueError("a checkpoint that costs nothing needs step_s: its best interval is one step")
            young, daly = young_interval(c, mtbf_s), daly_interval(c, mtbf_s)
            out.append(
                Point(
                    **at, strategy=name, young_s=young, daly_s=daly, best_s=best,
                    ettr=exact_ettr(best, c, restart_s, mtbf_s), meta=meta_ettr(best, restart_s, mtbf_s),
                )
            )  # fmt: skip
        if live_loss_s is not None:
            ettr = live_ettr(step_s, live_loss_s, mtbf_s, live_overhead_s)
            none = dict(young_s=None, daly_s=None, best_s=None, meta=None)
            out.append(Point(**at, **none, strategy="live recovery (torchft)", ettr=ettr))
    return out
