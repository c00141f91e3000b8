"""The watch's change-point detector: pure logic over per-step series, one value per target (a rank, a link)
per step, fed step by step while the run goes on.

A target is flagged when it becomes slower than its own past *and* than its peers:

1. per step, its log ratio to its peers' median (``log(x / median(others))``): a slowdown that every target
   shares (the whole job got slower) moves no ratio;
2. a one-sided CUSUM (Page's test) on that ratio against its own baseline (the median of its first ``warmup``
   steps, then of its last ``BASELINE`` steps before the CUSUM last left zero), with the drift half the smallest
   shift named (``MIN_RATIO``, 10%, ByteDance's threshold) and the threshold ``H_SIGMAS`` robust standard
   deviations (the baseline's MAD) of the ratio, floored at ``NOISE_FLOOR``;
3. when the CUSUM crosses, the onset is the change point since it last left zero (``_onset``), and the flag is
   confirmed only when the steps since the onset are, against the steps before it, slower than the peers by
   ``MIN_RATIO``, slower than the target's own past by as much, and a one-sided Mann-Whitney rank-sum test
   (normal approximation, midranks, tie and continuity corrections) gives p below ``ALPHA`` (strict: the test is
   repeated at every step); a crossing not confirmed within ``MAX_PENDING`` steps starts the CUSUM over (a burst
   of noise, not a change); and the steps since the onset must be ``MIN_AFTER`` or more and pass
   ``slower_than_drift``.

False alarms on a loaded host. On shared cores the load does not come and go for all ranks alike at every
moment: for a second or more one rank shares its core with another job and the other does not, then the load
moves. Such a stretch is, to the test above, a rank slower than its past and its peers: the baseline was taken
on a calmer stretch (or on one where the load sat on the peer), the load makes the rank's own time rise too, and
its steps are many and consistent enough for the rank-sum test. What tells a slow rank from it:

- it is slower than its peers *now*, not only than its own earlier ratio to them: a rank that went from 0.92x to
  1.04x of its peer because the load moved is no slower than them (an absolute floor: the median log ratio since
  the onset at least ``log(MIN_RATIO)``; ranks of one job run the same step);
- it is slower than its past was at its slowest: the floor is raised by the highest median of any stretch of as
  many points in the baseline (a rank whose past drifted up to 1.2x its peers must now be 1.1x above that);
- it lasts: ``MIN_AFTER`` points since the onset (not since the CUSUM's start, which comes earlier), and the floor
  holds on each half of them as well as on all (a stretch that ended halfway fails its second half);
- it has a past: its onset ``MIN_BEFORE`` points or more into the series (on a shorter past, the drift bound has
  little to take its slowest stretch from). A change found in that short past is dropped, not waited on: the onset
  is looked for again from ``MIN_AFTER`` points after it (a loaded host's first steps are often lopsided, and a
  CUSUM held on them for ``MAX_PENDING`` points started over past a later slowdown's onset);
- it is slower in seconds, not only as a ratio: since the onset, on the median and on each half, its gap to its
  peers (its time less their median) at least the host's jitter (``Detector.jitter``: the ``JITTER_QUANTILE`` of
  how far every target's gap strayed from its median before the onset). Where compute takes 8 ms, a rank that
  spends 2 s at 9 to 25 ms beside a peer at its floor is 2.3x its peer, consistent enough for the rank-sum test,
  and its 9 ms gap is what the load made the ranks' gaps stray 1 time in 4 or more (9 to 30 ms in bench trials at
  a load of 4 to 10); a rank that a fault holds longer is named (a bench trial's ``slow`` rank at 2.7x, at a load
  of about 10: a 17 ms gap where the gaps had strayed 12 ms 1 time in 4).
- it is slower than its own past usually got: since the onset its median time at least the ``OWN_QUANTILE``
  (0.95) of its own times before (``above_own_spread``). A load that moves from one core to the other makes the rank
  it moves onto 7.7x its peer for 2 s, 28 ms above it where the gaps had strayed 14 ms, p 9e-8: every test above
  passes. But its times then (a median of 34 to 42 ms) are what its own times had reached 1 time in 10 to 20 before
  (39 and 49 ms), when the load sat on its core earlier; a fault makes it slower than it had been
  (tests/unit/test_watch_detect.py ``CLEAN_MOVED``, kept by the watch in a clean trial's record, suite/watch/replay.py;
  at the 90th percentile it was named 6 points later, at point 95). A rank slowed 2x or more is named from the same
  onset, at the same point mostly: of 10 seeded series with 30% noise, 7 at the same point, one 25 points later;
  the bench's recorded 2.7x trial (``SLOWED_2_7``) 3 points later.

Rejected: the peers' spread in the baseline (with two ranks there is one peer, no spread); comparing against the
peers' same-time blocks alone, without the rank's past (a rank slower by nature would be named from the start); for
the floor in seconds, the gap's growth since the onset against a higher quantile (0.95) of its straying: it missed
that 2.7x ``slow`` rank (the gaps had strayed 35 ms 1 time in 20).
A slow rank pays for this in time to detect (``MIN_AFTER`` points, a few seconds at the watch's points), not in
what it can name (tests/unit/test_watch_detect.py plants both).

``Nodes`` turns the flags of every rank of one node, at one point or several, into one flag of the node.

Why no library: the well-kept change-point library, ruptures, segments a whole series after the fact (offline)
and is not a pinned dependency, nor is scipy (its rank-sum test); Page's CUSUM and the rank-sum test are the few
lines below, deterministic on every CPU (no random draws, only sorting and sums), and unit-tested on seeded
synthetic series (tests/unit/test_watch_detect.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from suite.watch import foreign

MIN_RATIO = 1.10
"""The smallest slowdown named: 10% slower than before, relative to the peers."""
WARMUP = 16
"""Steps of a target's baseline before it can be flagged."""
BASELINE = 64
"""The baseline: the median and the MAD of a target's last steps (at most this many) before its CUSUM left zero."""
H_SIGMAS = 6.0
"""The CUSUM's threshold, in robust standard deviations of the baseline's log ratio."""
NOISE_FLOOR = 0.03
"""The least standard deviation assumed of a log ratio (a baseline quieter than timing noise on a loaded host)."""
MIN_AFTER = 12
"""Steps after the onset (and after the CUSUM's start) before a flag can be confirmed: how long a slowdown must
last (a loaded host's stretches are shorter)."""
MIN_BEFORE = WARMUP + MIN_AFTER
"""Steps before a flag's onset, at least: the warm-up's and as many as the evidence after it needs. Within the first
steps the past is too short for the bound on its drift and for the rank-sum test (a loaded host's first stretch of a
rank sharing its core was named on 24 points of past); a slowdown that starts there has no past to compare with."""
MAX_PENDING = 48
"""Steps a crossing may wait for its confirmation before the CUSUM starts over."""
REBASE = 16
"""Steps between two estimates of a target's baseline."""
ALPHA = 1e-6
"""The rank-sum test's one-sided level: after the onset slower than before. At 3e-6 a bench's clean trial at a load of
about 5 was named: rank 0 at 9 to 17 ms for 3 s beside its peer at a 6 ms floor, 2.9 ms above it against a jitter of
2.2 ms, p = 2.2e-6 (tests/unit/test_watch_detect.py ``CLEAN_LOADED_2``). The smoke's slowed ranks are named at the
same step at 1e-6 (12 or more points each above every point of the 64 before give p < 3e-8)."""
OWN_QUANTILE = 0.95
"""A slowdown's floor in the rank's own past: since the onset its median time must reach this quantile of its own
times before (``above_own_spread``)."""
JITTER_QUANTILE = 0.75
"""The absolute floor of a slowdown (``Detector.jitter``): since the onset a target must be slower than its peers, in
seconds, by at least this quantile of how far every target's gap to its peers strayed from its usual before."""


@dataclass(frozen=True)
class Flag:
    """A target named slow: what, since when (``onset``, a step index), seen at step ``detected``, by how much."""

    kind: str
    """rank | node | link"""
    target: str
    """``rank 1``, ``node1``, ``link 0->1``"""
    ranks: tuple[int, ...]
    metric: str
    """What was slower: ``compute`` (a rank's own time) or ``transfer`` (a link's)."""
    onset: int
    detected: int
    ratio: float
    """Its time over its peers' median after the onset, relative to before."""
    own_ratio: float
    """Its median time after the onset over its median before."""
    p: float
    """The rank-sum test's one-sided p-value (after the onset slower than before, relative to the peers)."""
    before: int = 0
    after: int = 0
    """Steps on either side of the onset that the evidence holds."""
    test: str = "rank-sum"
    """What confirmed it: ``rank-sum`` (this module: the medians moved) or ``pauses`` (suite/watch/pauses.py: a
    rank stopped now and then)."""
    events: int = 0
    """The pauses counted (``pauses`` only)."""
    note: str = ""
    """The evidence in words, where the test has its own (``probe``: suite/watch/links.py)."""
    foreign: float | None = None
    """The percentage of its host's CPU that processes outside the run used, on the mean since the onset
    (suite/watch/foreign.py; None: not measured): ``FOREIGN_PCT`` or more classes the flag ``foreign load``."""


def p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:z.3f}"


def rank_sum_p(before: Sequence[float], after: Sequence[float]) -> float:
    """One-sided Mann-Whitney p-value that ``after`` is larger than ``before`` (normal approximation with midranks
    and the tie and continuity corrections)."""
    n1, n2 = len(after), len(before)
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = sorted([(v, 1) for v in after] + [(v, 0) for v in before])
    ranks, ties, i = [0.0] * len(pooled), 0.0, 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    u = sum(r for r, (_, side) in zip(ranks, pooled) if side) - n1 * (n1 + 1) / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


@dataclass
class _Track:
    """One target's state: its values, its log ratios to the peers, the CUSUM and where it last left zero."""

    values: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    """Its time less its peers' median, per step (seconds)."""
    ratios: list[float] = field(default_factory=list)
    base: float | None = None
    based: int = 0
    sigma: float = NOISE_FLOOR
    cusum: float = 0.0
    start: int = 0
    flagged: bool = False
    settled: bool = False


def _rebase(tr: _Track, start: int) -> None:
    """The CUSUM (re)starts at step ``start``: its baseline is the target's last ``BASELINE`` log ratios before
    (taken again every ``REBASE`` steps at most)."""
    tr.start = start
    if tr.base is not None and start - tr.based < REBASE:
        return
    window = tr.ratios[max(0, start - BASELINE) : start]
    tr.base = statistics.median(window)
    tr.sigma = max(1.4826 * statistics.median([abs(r - tr.base) for r in window]), NOISE_FLOOR)
    tr.based = start


def slower_than_drift(before: Sequence[float], after: Sequence[float]) -> bool:
    """Whether the log ratios ``after`` the onset are, on their median and on each of their halves', above
    ``MIN_RATIO`` against the peers at the same time (an absolute floor) and against the slowest stretch of as many
    points in ``before`` (the past's own drift): see the module's "False alarms on a loaded host"."""
    floor = math.log(MIN_RATIO)
    n = len(after)
    drift = max(
        (statistics.median(before[i : i + n]) for i in range(len(before) - n + 1)),
        default=statistics.median(before),
    )
    halves = (after, after[: n // 2], after[n // 2 :])
    return all(statistics.median(h) >= floor + max(drift, 0.0) for h in halves)


def above(gaps: Sequence[float], floor: float) -> bool:
    """Whether ``gaps`` (a target's time less its peers' median since the onset, seconds) are, on their median and
    on each of their halves', ``floor`` or more: the rank slower than its peers now by more than the host's jitter."""
    n = len(gaps)
    return all(statistics.median(h) >= floor for h in (gaps, gaps[: n // 2], gaps[n // 2 :]))


def above_own_spread(before: Sequence[float], after: Sequence[float]) -> bool:
    """Whether the rank's times ``after`` the onset are, on their median, at or above the ``OWN_QUANTILE`` of its
    own times ``before``: slower than its past usually got, not only than its past's middle."""
    ranked = sorted(before)
    return statistics.median(after) >= ranked[min(len(ranked) - 1, int(OWN_QUANTILE * len(ranked)))]


def _onset(ratios: Sequence[float], start: int, step: int, base: float) -> int:
    """The change point in ``start..step``: where the sum of the ratios since, less the level halfway between the
    baseline and the level since ``start``, is largest (the CUSUM's own start lags the noise before a change)."""
    mid = (base + statistics.median(ratios[start : step + 1])) / 2
    best, total, at = float("-inf"), 0.0, start
    for t in range(step, start - 1, -1):
        total += ratios[t] - mid
        if total > best:
            best, at = total, t
    return at


class Detector:
    """Targets' series, one step at a time (``add``); each target flagged at most once."""

    def __init__(self, metric: str, kind: str, ranks_of: Mapping[str, tuple[int, ...]], warmup: int = WARMUP):
        self.metric, self.kind, self.ranks_of, self.warmup = metric, kind, dict(ranks_of), warmup
        self.tracks = {t: _Track() for t in ranks_of}
        self.shift = math.log(MIN_RATIO)
        self.steps = 0

    def add(self, values: Mapping[str, float]) -> list[Flag]:
        """One step's value of every target (seconds, > 0); the flags this step confirms."""
        step, out = self.steps, []
        self.steps += 1
        if len(values) < 2:
            return out
        for t, x in values.items():
            peers = [v for k, v in values.items() if k != t]
            tr = self.tracks[t]
            tr.values.append(x)
            tr.gaps.append(x - statistics.median(peers))
            tr.ratios.append(math.log(max(x, 1e-12) / max(statistics.median(peers), 1e-12)))
            if len(tr.ratios) == self.warmup:
                _rebase(tr, step + 1)
            elif tr.base is not None and not tr.flagged:
                flag = self._step(t, tr, step)
                if flag is not None:
                    out.append(flag)
        return out

    def _step(self, target: str, tr: _Track, step: int) -> Flag | None:
        tr.cusum += tr.ratios[step] - tr.base - self.shift / 2
        if tr.cusum <= 0:
            tr.cusum = 0.0
            _rebase(tr, step + 1)
            return None
        if tr.cusum < H_SIGMAS * tr.sigma or step + 1 - tr.start < MIN_AFTER:
            return None
        flag = self._confirm(target, tr, step)
        if flag is None and (tr.settled or step + 1 - tr.start >= MAX_PENDING):
            tr.cusum, tr.settled = 0.0, False
            _rebase(tr, step + 1)
        if flag is not None:
            tr.flagged = True
        return flag

    def jitter(self, first: int, onset: int) -> float:
        """The host's jitter over ``first..onset``, in seconds: the ``JITTER_QUANTILE`` of how far every target's gap
        to its peers strayed from its median there, pooled."""
        dev = []
        for tr in self.tracks.values():
            window = tr.gaps[first:onset]
            if window:
                mid = statistics.median(window)
                dev += [abs(g - mid) for g in window]
        return sorted(dev)[min(len(dev) - 1, int(JITTER_QUANTILE * len(dev)))] if dev else 0.0

    def _confirm(self, target: str, tr: _Track, step: int) -> Flag | None:
        onset = _onset(tr.ratios, tr.start, step, tr.base)
        if onset < MIN_BEFORE:  # a change in the too-short past: dropped, a later one (after it lasted) looked for
            later = max(MIN_BEFORE, onset + MIN_AFTER)
            if step + 1 - later < MIN_AFTER:
                return None
            onset = _onset(tr.ratios, later, step, tr.base)
        if step + 1 - onset < MIN_AFTER:  # it must last
            return None
        first = max(0, onset - BASELINE)  # the evidence before: the baseline's steps at most
        before_r, after_r = tr.ratios[first:onset], tr.ratios[onset : step + 1]
        level = statistics.median(after_r)
        ratio = math.exp(level - statistics.median(before_r))
        own = statistics.median(tr.values[onset : step + 1]) / statistics.median(tr.values[first:onset])
        # a level the rank has held for MIN_AFTER points under the floor: no slowdown, the CUSUM starts over
        tr.settled = not slower_than_drift(before_r, after_r)
        if ratio < MIN_RATIO or own < MIN_RATIO or tr.settled:
            return None
        if not above(tr.gaps[onset : step + 1], self.jitter(first, onset)):  # more seconds than the host strays
            return None
        if not above_own_spread(tr.values[first:onset], tr.values[onset : step + 1]):
            return None
        p = rank_sum_p(before_r, after_r)
        if p >= ALPHA:
            return None
        return Flag(
            kind=self.kind,
            target=target,
            ranks=self.ranks_of[target],
            metric=self.metric,
            onset=onset,
            detected=step,
            ratio=ratio,
            own_ratio=own,
            p=p,
            before=len(before_r),
            after=len(after_r),
        )


class Nodes:
    """Rank flags to node flags, across points: once every rank of a node (of several nodes) is flagged, at one point
    or at several, the node is named once: the earliest onset, the median ratio, the largest p-value."""

    def __init__(self, ranks_of_node: Mapping[str, tuple[int, ...]]) -> None:
        self.nodes = dict(ranks_of_node)
        self.flagged: dict[int, Flag] = {}
        self.named: set[str] = set()

    def add(self, flags: Sequence[Flag]) -> list[Flag]:
        """What to show of one point's flags: a node's flag where this point completes it (for its ranks flagged
        now), the other flags as they are."""
        self.flagged.update({f.ranks[0]: f for f in flags if f.kind == "rank"})
        out, merged = [], set()
        for node, ranks in self.nodes.items() if len(self.nodes) > 1 else ():
            if node not in self.named and ranks and all(r in self.flagged for r in ranks):
                self.named.add(node)
                merged.update(ranks)
                out.append(_node_flag(node, ranks, [self.flagged[r] for r in ranks]))
        return out + [f for f in flags if not (f.kind == "rank" and f.ranks[0] in merged)]


def _node_flag(node: str, ranks: tuple[int, ...], fs: list[Flag]) -> Flag:
    return Flag(
        kind="node",
        target=node,
        ranks=tuple(ranks),
        metric=fs[0].metric,
        onset=min(f.onset for f in fs),
        detected=max(f.detected for f in fs),
        ratio=statistics.median(f.ratio for f in fs),
        own_ratio=statistics.median(f.own_ratio for f in fs),
        p=max(f.p for f in fs),
        before=min(f.before for f in fs),
        after=min(f.after for f in fs),
        test=fs[0].test,
        events=min(f.events for f in fs),
        foreign=max((f.foreign for f in fs if f.foreign is not None), default=None),
    )


def merge_nodes(flags: Sequence[Flag], ranks_of_node: Mapping[str, tuple[int, ...]]) -> list[Flag]:
    """``flags`` of one point, where every rank of a node (of several nodes) is flagged, with one flag of that node
    instead of its ranks' (``Nodes`` across points)."""
    return Nodes(ranks_of_node).add(flags)


def line(flag: Flag, after_onset_s: float | None) -> str:
    """The terminal's line: ``# slow: node1 (ranks 2, 3) compute 1.9x since step 41 (detected 6.2 s after
    onset, p < 0.001)``."""
    who = flag.target
    if flag.kind == "node":
        who += f" ({'rank' if len(flag.ranks) == 1 else 'ranks'} {', '.join(map(str, flag.ranks))})"
    when = "" if after_onset_s is None else f"detected {after_onset_s:z.1f} s after onset, "
    text = f"# slow: {who} {flag.metric} {flag.ratio:z.1f}x since step {flag.onset} ({when}{p_text(flag.p)})"
    if foreign.classed(flag.foreign) == "foreign load":
        text += f"; foreign load: processes outside the run used {flag.foreign:z.0f}% of its host's CPU"
    return text
