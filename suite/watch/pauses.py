"""The watch's second detector: a rank stopped now and then (a garbage collector's pauses, the injector's ``pause``),
which the change-point detector (detect.py) does not see.

A pause that holds up one step in many moves no median: the change-point detector compares medians (its
rank-sum test ranks the steps), so a rank stopped for 0.4 s after every second it runs (+30% on the job's mean
step here) is, to it, a few outliers. Here each point's *excess*, the target's time less its peers' median, is
compared with the points' usual size (the median over the last ``BASELINE`` points of every target's median, the
``scale``): a point whose excess is ``SPIKE_X`` times that or more is a *spike*. A target is flagged when its spikes
come ``EVENTS`` times or more, each apart from the last (a spike on the next point is the same pause), within
``WINDOW`` points, after points with none (``BASELINE`` of them, or all since the first ``WARMUP`` where fewer, at
least ``PAST``), and they slow it against its peers by ``MIN_RATIO`` on the mean (what the job's time shows). A
change of the whole scale moves no excess; one stall of the host that holds a rank for a while is one event, and so
is a burst of them.

What a point holds of a rank (``held``): its compute, and how much later than its peers' its step ended. A rank
stopped while it runs is stopped in its own forward and backward (its compute grows, and its peers' steps wait at
the all-reduce: every step grows alike) or after the all-reduce, in its optimizer step (its step ends later; its
peers wait at the barrier before the next step, outside theirs). Its compute alone saw the first only: of 9
pauses of a bench trial (``pause:1:5:0.4:20``, steps of 20 ms on this 2-core machine), 5 fell in the compute, 3 in
the optimizer step, 1 where both ranks' steps grew alike (nothing to name), and 4 spikes within 96 points came in
some trials only. A pause in a wait at a collective holds every rank alike and shows in neither.

Why these and not an upper quantile or a share of steps above the rank's past p90: pauses that come every 10 to 30
steps put one step in 10 to 30 above any quantile of the past, as often as the noise does below p90, and a test of
that share needs hundreds of steps before and after; the spikes' size is what tells them from noise (a pause is
several steps long), and their recurrence what tells them from one stall of the host. The evidence's ``p`` is the
exact chance, steps exchangeable, that the spikes counted all fall after the onset (a hypergeometric tail).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from .detect import MIN_RATIO, Flag

SPIKE_X = 4.0
"""A spike: an excess over the peers' median at least this many times the points' usual size."""
EVENTS = 4
"""Spikes (each apart from the last) that make a flag."""
WINDOW = 96
"""The points within which they must come."""
BASELINE = 48
"""Points before the first of them, with no spike; the usual size is the median over as many points."""
WARMUP = 8
"""The first points, whose spikes are not counted (the first steps are slower: the run warms up)."""
PAST = 28
"""The fewest points with no spike before the first of a flag's (after ``WARMUP``; ``BASELINE`` where there are
that many). A bench trial's steps fill its budget at the first steps' speed and its injection starts 5 s into them:
where the load made its points 120 ms long (blocks of 3 steps of 40 ms), 43 points came before the onset, and with
``BASELINE`` points asked for, the first pause was too early to be an onset and every later one had a pause within
``BASELINE`` points before it: a rank paused 0.5 s after every 0.5 s it ran, its step 2x slower, was never named.
As many as the change-point detector asks (detect.py ``MIN_BEFORE``)."""


def held(computes: Sequence[float], steps: Sequence[float]) -> list[float]:
    """Per rank (its position), one step's time that is its own: its compute, plus how much longer its step took
    than its peers' median step (nothing where not longer)."""
    out = []
    for k, (c, s) in enumerate(zip(computes, steps, strict=True)):
        peers = [x for j, x in enumerate(steps) if j != k]
        out.append(c + max(0.0, s - statistics.median(peers)) if peers else c)
    return out


class Pauses:
    """Targets' series, one point at a time (``add``); each target flagged at most once."""

    def __init__(self, metric: str, kind: str, ranks_of: Mapping[str, tuple[int, ...]]):
        self.metric, self.kind, self.ranks_of = metric, kind, dict(ranks_of)
        self.values: dict[str, list[float]] = {t: [] for t in ranks_of}
        self.peers: dict[str, list[float]] = {t: [] for t in ranks_of}
        self.spikes: dict[str, list[int]] = {t: [] for t in ranks_of}
        self.typical: list[float] = []  # per point: every target's median
        self.flagged: set[str] = set()

    def add(self, values: Mapping[str, float]) -> list[Flag]:
        """One point's value of every target (seconds, > 0); the flags it completes."""
        step, out = len(self.typical), []
        self.typical.append(statistics.median(values.values()))
        if len(values) < 2:
            return out
        scale = statistics.median(self.typical[-BASELINE:])
        for t, x in values.items():
            peer = statistics.median(v for k, v in values.items() if k != t)
            self.values[t].append(x)
            self.peers[t].append(peer)
            spikes = self.spikes[t]
            if step >= WARMUP and x - peer >= SPIKE_X * scale:
                if not spikes or spikes[-1] < step - 1:
                    spikes.append(step)
                else:
                    spikes[-1] = step  # the same pause, on the next point too
            if t not in self.flagged and spikes and spikes[-1] == step:
                flag = self._confirm(t, step)
                if flag is not None:
                    self.flagged.add(t)
                    out.append(flag)
        return out

    def _confirm(self, t: str, step: int) -> Flag | None:
        spikes = self.spikes[t]
        recent = [s for s in spikes if s > step - WINDOW]
        if len(recent) < EVENTS:
            return None
        onset = recent[0]
        first = max(WARMUP, onset - BASELINE)
        if onset - first < PAST or any(first <= s < onset for s in spikes):
            return None
        xs, ps = self.values[t], self.peers[t]
        before = sum(xs[first:onset]) / sum(ps[first:onset])
        after = sum(xs[onset : step + 1]) / sum(ps[onset : step + 1])
        own = statistics.fmean(xs[onset : step + 1]) / statistics.fmean(xs[first:onset])
        if after / before < MIN_RATIO or own < MIN_RATIO:
            return None
        n_after = step + 1 - onset
        k = len(recent)
        p = math.comb(n_after, k) / math.comb(n_after + onset - first, k)
        return Flag(
            self.kind, t, self.ranks_of[t], self.metric, onset, step, after / before, own, p, onset - first, n_after,
            test="pauses", events=k,
        )  # fmt: skip
