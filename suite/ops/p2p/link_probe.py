"""The link probe: the window pattern (window.py) on its pair, unidirectional and bidirectional, at sizes beyond
the sweep (MAX_BYTES x 4, x 16, ... up to ``PROBE_CAP_BYTES``), so that the link's rate is measured where it has
stopped growing whatever MAX_BYTES is (suite/model/link_rate.py reads it; docs/metrics.md, "The link's rate").

Cases are declared before anything runs, so every step up to the cap is declared and each one decides at run
time, from what the steps before it measured, whether it runs: the stop rule is ``rule.probe_stop``
(levelled off, size cap, time bound). A step that does not run is a step not taken (suite.errors.StepNotTaken:
no list of skipped cases names it); a step that runs records ``link_probe`` (how far the probe went and, on the
last one, why it stopped). Its cases are window cases with ``beyond_sweep: true`` in their identity (the sweep's
own window cases are unchanged) and ``table: link_probe`` (the report groups them apart from the window's sweep).

Every decision is made alike on every rank: the rates come from the samples reduced across ranks, and the time
spent is the slowest rank's (one all_reduce after each step).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from suite import metrics
from suite.case import Case, StepNotTaken
from suite.harness.budget import BUDGET_MIN_SAMPLES
from suite.model import link_probe as rule
from suite.model.link_probe import PROBE_CAP_BYTES, PROBE_STEP, PROBE_TIME_S, RatePoint

PROBE_WINDOW_BYTES = 16 << 20
"""Beyond the sweep the window shrinks so that window x message size stays below this (each rank of the pair
then holds at most this much in messages each way, or one message above it: memory-safe on a shared host)."""


@dataclass
class _State:
    """One probe (direction mode, pair) within a process group's session."""

    points: dict = field(default_factory=dict)
    """size -> RatePoint, the sweep's and the probe's steps."""
    msg_s: dict = field(default_factory=dict)
    """size -> median time per message, seconds."""
    started: float | None = None
    """This rank's clock when the first step beyond the sweep began."""
    spent_s: float = 0.0
    step_s: float = 0.0
    """The wall time of the last step beyond the sweep (the slowest rank's)."""
    stopped: tuple[str, str] | None = None


def _state(session, variant: str, src: int, dst: int) -> _State:
    return session.once(("link_probe", variant, src, dst), _State)


def probe_window(size: int, window_max: int) -> int:
    return max(1, min(window_max, PROBE_WINDOW_BYTES // size))


def sizes_beyond(max_bytes: int) -> list[int]:
    """The probe's sizes beyond the sweep's largest: x4 steps up to PROBE_CAP_BYTES."""
    out, s = [], max_bytes * PROBE_STEP
    while max_bytes > 0 and s <= PROBE_CAP_BYTES:
        out.append(s)
        s *= PROBE_STEP
    return out


def step_cost_s(cfg, iteration_s: float) -> float:
    """What one step of ``iteration_s`` per iteration is predicted to take: its warm-up, its samples (as the
    sample budget or precision mode bound them) and two untimed checked ops."""
    if iteration_s <= 0:
        return 0.0
    if cfg.precision_pct:
        return cfg.max_time_s + (cfg.warmup_iters + 2) * iteration_s
    n = cfg.iters
    if cfg.budget_s:
        n = min(cfg.iters, max(BUDGET_MIN_SAMPLES, int(cfg.budget_s / iteration_s)))
    return (n + cfg.warmup_iters + 2) * iteration_s


def _next_cost(cfg, st: _State, size: int, window_max: int) -> float:
    """The predicted cost of the step after ``size``: its samples at the time per message x4 (a rate that has
    not grown); after a step beyond the sweep, that step's wall time (what a step costs besides its samples:
    its buffers, its checks) plus what the samples add."""
    nxt = size * PROBE_STEP
    nxt_s = step_cost_s(cfg, st.msg_s.get(size, 0.0) * PROBE_STEP * probe_window(nxt, window_max))
    last_s = step_cost_s(cfg, st.msg_s.get(size, 0.0) * probe_window(size, window_max))
    return max(nxt_s, st.step_s + nxt_s - last_s)


def observe(ctx, s, m, session, *, max_bytes: int | None, window_max: int) -> dict:
    """After a window case of ``s`` timed as ``m`` (per message): keep its rate for the probe; on a step beyond
    the sweep (``max_bytes``: the sweep's largest size; None: a case of the sweep) also the time spent and the
    stop rule's verdict, returned as the record's ``link_probe``."""
    st = _state(session, s.variant, s.src, s.dst)
    t = m.median_s
    if t <= 0:
        return {}
    lo, hi = metrics.median_ci(m.samples_s)
    ci = (s.size_bytes / hi / 1e9, s.size_bytes / lo / 1e9) if lo > 0 else None
    st.points[s.size_bytes] = RatePoint(s.size_bytes, s.size_bytes / t / 1e9, ci)
    st.msg_s[s.size_bytes] = t
    if max_bytes is None:
        return {}
    mine = torch.tensor([time.monotonic() - (st.started or time.monotonic())], dtype=torch.float64)
    if ctx.device.type != "cpu":
        mine = mine.to(ctx.device)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=ctx.group)  # the slowest rank's time: alike on every rank
    st.step_s, st.spent_s = float(mine.item()) - st.spent_s, float(mine.item())
    points = [p for size, p in st.points.items() if size <= s.size_bytes]
    st.stopped = rule.probe_stop(
        points, spent_s=st.spent_s, next_s=_next_cost(session.cfg, st, s.size_bytes, window_max)
    )
    gain = step_gain_fields(st, s.size_bytes)
    return {
        "link_probe": {
            "beyond_max_bytes": True,
            "max_bytes": max_bytes,
            "step": sizes_beyond(max_bytes).index(s.size_bytes) + 1,
            **gain,
            "spent_s": round(st.spent_s, 3),
            "time_bound_s": PROBE_TIME_S,
            "cap_bytes": PROBE_CAP_BYTES,
            "stopped": st.stopped[1] if st.stopped else None,
            "why": st.stopped[0] if st.stopped else None,
        }
    }


def step_gain_fields(st: _State, size: int) -> dict:
    prev = st.points.get(size // PROBE_STEP)
    if prev is None:
        return {"gain_pct": None, "gain_ci_pct": None}
    gain, ci = rule.step_gain(prev, st.points[size])
    return {"gain_pct": round(100 * gain, 2), "gain_ci_pct": [round(100 * x, 2) for x in ci] if ci else None}


def resolver(s, max_bytes: int, window_max: int):
    """The resolve hook of the probe's step ``s``: skipped (the same on every rank) once the probe has stopped,
    or where the rule stops it before its first step (levelled off within the sweep, or the step would pass the
    time bound); else it runs and the probe's clock starts with its first step."""

    def resolve(case: Case, ctx, cfg, session) -> Case:
        st = _state(session, s.variant, s.src, s.dst)
        below = s.size_bytes // PROBE_STEP
        if st.stopped is None and below not in st.points:  # the step before did not complete
            st.stopped = ("no rate", f"no rate at {rule.size_text(below)} (its window case did not complete)")
        if st.stopped is None and st.started is None:  # the first step: what the sweep measured decides
            points = [p for size, p in st.points.items() if size <= below]
            st.stopped = rule.probe_stop(points, next_s=_next_cost(cfg, st, below, window_max))
            if st.stopped is None:
                st.started = time.monotonic()
        if st.stopped is not None:
            raise StepNotTaken(f"link probe stopped: {st.stopped[1]}")
        return case

    return resolve


PROVENANCE = {
    "link_probe": "measured: how far the link probe went beyond MAX_BYTES (x4 steps), the step's gain over the "
    "size a quarter of it (the rates' medians; its interval from their medians' intervals), the time spent "
    "beyond the sweep (the slowest rank's clock) and, on its last step, why it stopped "
    "(suite.model.rule.probe_stop: levelled off, size cap or time bound)"
}


def beyond_case(case: Case, s, build, max_bytes: int, window_max: int) -> Case:
    """A window case of ``s`` made a step of the link probe (its identity marked, its table the probe's);
    ``build(ctx, s, max_bytes)``: the window's builder."""
    return dataclasses.replace(
        case,
        build=lambda ctx, session: build(ctx, s, max_bytes),
        identity={**case.identity, "beyond_sweep": True},
        fields={**case.fields, "table": "link_probe", "window_max_bytes": PROBE_WINDOW_BYTES},
        provenance={**case.provenance, **PROVENANCE},
        resolve=resolver(s, max_bytes, window_max),
    )
