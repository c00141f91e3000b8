"""How far the link's streaming probe goes beyond the sweep (suite/ops/p2p/link_probe.py runs it; suite.model.link_rate
reads it): its sizes' step, cap and time bound, and the stop rule ``probe_stop``. Pure: numbers in, a verdict out."""

from __future__ import annotations

from dataclasses import dataclass

PROBE_STEP = 4
"""The link probe's sizes beyond the sweep: MAX_BYTES x 4, x 16, ... (suite/ops/p2p/link_probe.py)."""
PROBE_CAP_BYTES = 64 << 20
"""The largest message the link probe sends."""
PROBE_TIME_S = 2.0
"""The link probe's own time beyond the sweep, per direction mode (unidirectional, bidirectional), seconds:
it starts no step that its spent time and the step's predicted cost would take past this."""
LEVELLED_GAIN = 0.05
"""The rate has levelled off where one x4 step gained less than this share over the size before it."""


@dataclass(frozen=True)
class RatePoint:
    """The probe's rate at one message size, GB/s, with the interval of its median (None: unknown)."""

    size_bytes: int
    gbps: float
    ci_gbps: tuple[float, float] | None = None


def size_text(n: int) -> str:
    """``4 MiB``, ``16 KiB``, ``512 B``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:zg} {unit}"
    return f"{n} B"


def step_gain(prev: RatePoint, last: RatePoint) -> tuple[float, tuple[float, float] | None]:
    """What one step gained, as a share of the rate before it, and that gain's interval (the worst and the best
    pairing of the two rates' intervals; None where either is unknown)."""
    gain = last.gbps / prev.gbps - 1
    if prev.ci_gbps is None or last.ci_gbps is None or min(prev.ci_gbps) <= 0:
        return gain, None
    return gain, (last.ci_gbps[0] / prev.ci_gbps[1] - 1, last.ci_gbps[1] / prev.ci_gbps[0] - 1)


def probe_stop(
    points: list[RatePoint],
    *,
    cap_bytes: int = PROBE_CAP_BYTES,
    spent_s: float = 0.0,
    next_s: float = 0.0,
    time_s: float = PROBE_TIME_S,
) -> tuple[str, str] | None:
    """Why the streaming probe takes no step beyond its largest size, ``(why, in words)``, or None to go on.

    In this order: the rate has levelled off (the last x4 step gained less than LEVELLED_GAIN over the size a
    quarter of it; the words give the gain and its interval); the next step would pass ``cap_bytes``; the time
    spent beyond the sweep and the next step's predicted cost would pass ``time_s``. ``why`` is ``levelled
    off``, ``size cap`` or ``time bound``."""
    if not points:
        return None
    at = {p.size_bytes: p for p in points}
    last = max(points, key=lambda p: p.size_bytes)
    prev = at.get(last.size_bytes // PROBE_STEP) if last.size_bytes % PROBE_STEP == 0 else None
    growing = ""
    if prev is not None:
        gain, ci = step_gain(prev, last)
        within = f", interval [{ci[0]:+z.0%}, {ci[1]:+z.0%}]" if ci else ""
        said = f"{gain:+z.0%} over {size_text(prev.size_bytes)}{within}"
        if gain < LEVELLED_GAIN:
            return "levelled off", f"levelled off at {size_text(last.size_bytes)} ({said})"
        growing = f"; still growing ({said})"
    if last.size_bytes * PROBE_STEP > cap_bytes:
        return "size cap", f"size cap {size_text(cap_bytes)} reached at {size_text(last.size_bytes)}{growing}"
    if spent_s + next_s > time_s:
        return "time bound", (
            f"time bound {time_s:zg} s: {spent_s:z.2f} s spent, the step to {size_text(last.size_bytes * PROBE_STEP)} "
            f"would take about {next_s:z.2f} s{growing}"
        )
    return None
