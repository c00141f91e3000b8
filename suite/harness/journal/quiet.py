"""The timed samples journaled per sample, not per op: no journal work inside the timed region.

Recording an op (``Journal.enter``: its group's sequence number, the entry, the ring file) costs about a
microsecond or two per call, as much as a whole op on a one-rank MPI group: inside a sample it would be part of
what the suite reports. So on the host clock's path (suite/harness/timing.py) the journal keeps the timed samples
this way:

- ``Watch`` notes the ops of the last untimed warm-up sample (the case's call as the samples issue it), through
  the wrappers as every other op. It is the *pattern* only when c10d's sequence number of every group it touched
  moved by exactly the ops the journal saw there (no op issued past the wrappers, such as DDP's reducer's).
- For each timed round ``Quiet`` puts torch's own functions back on ``torch.distributed`` (what the journal wrapped;
  a wrapper put above the journal's stays), and before each sample's barrier, outside the sample, it records the
  sample's ops as the pattern says: the barrier, then the call's ops, each ``entered`` with the sequence number it
  will have. A hang in the sample finds them in the journal and its ring file as the wrappers would have left them:
  which op, on which group, at which number, in which case.
- After the sample (outside it) c10d's sequence numbers say whether the sample issued exactly those ops: then they
  are ``completed`` (at the sample's end) and counted (the p2p ops among them too, for the after-case check); if
  not (a rank that skipped or added an op, an op issued past the wrappers) they are ``unconfirmed``, c10d's count
  stands, and the round's remaining samples are journaled per op by the wrappers again.

Without a pattern (no warm-up, a group c10d keeps no count for, ops the journal did not see) every sample is
journaled per op, as everywhere else. What the per-op path keeps that this does not: each op's own start and end
(a timed op's entry spans its whole sample).
"""

from __future__ import annotations

from time import perf_counter
from types import FunctionType

import torch.distributed as dist

from suite.harness.journal import P2P, TAIL, current

__all__ = ["Quiet", "Watch", "current"]


def _getters(journal) -> dict:
    """Group name -> its sequence getter, for every group the journal knows that c10d counts."""
    return {name: get for name, get in journal.known.values() if get is not None}


def _seqs(getters: dict) -> dict:
    return {name: int(get()) for name, get in getters.items()}


class Watch:
    """Around one untimed sample: ``steps``, the ops it issued as (op, group name, shape, dtype, peer), when they
    are the pattern of a sample; None otherwise."""

    def __init__(self, journal):
        self.journal, self.steps = journal, None

    def __enter__(self):
        self.getters = _getters(self.journal)
        self.seq0, self.written = _seqs(self.getters), self.journal.written
        return self

    def __exit__(self, *exc) -> None:
        j, n = self.journal, self.journal.written - self.written
        if exc[0] is not None or not 0 < n <= TAIL // 2:
            return
        steps = [(e[0], e[1], e[3], e[4], e[5]) for e in list(j.entries)[-n:]]
        moved = {name: seq - self.seq0.get(name, seq) for name, seq in _seqs(_getters(j)).items()}
        mine = {name: sum(s[1] == name for s in steps) for name in moved}
        if all(s[1] in self.seq0 for s in steps) and moved == mine:
            self.steps = steps


def _unwrapped(journal) -> list | None:
    """Put torch's own functions back where ``torch.distributed`` holds this journal's wrappers; (name, wrapper)
    of each, to put back. None (nothing changed) where a wrapper sits above the journal's (a fault planted below
    the harness, suite/harness/plant/below.py): what it issues is journaled per op."""
    ours = {}
    for name, fn in list(vars(dist).items()):
        if type(fn) is not FunctionType:  # the wrappers are functions (and other names warn when read)
            continue
        if getattr(getattr(fn, "__wrapped__", None), "__suite_journal__", None) is journal:
            return None  # (functools.wraps copied the journal's marks onto it: asked first)
        if getattr(fn, "__suite_journal__", None) is journal and hasattr(fn, "__suite_original__"):
            ours[name] = fn
    for name, fn in ours.items():
        setattr(dist, name, fn.__suite_original__)
    return list(ours.items())


class Quiet:
    """One timed round's samples journaled per sample (the module's doc): ``expect`` before each sample's barrier,
    ``confirm`` after it, ``end`` once after the round (or at the first sample that breaks the pattern)."""

    def __init__(self, journal, barrier_group, steps: list):
        barrier = journal.group_of(barrier_group)
        self.journal, self.getters = journal, _getters(journal)
        self.steps = [("barrier", barrier[0], None, None, None), *steps]
        self.seq = _seqs(self.getters)
        self.p2p = {name: sum(s[1] == name and s[0] in P2P for s in self.steps) for name in self.seq}
        self.pending: list = []
        self.want: dict = {}
        self.written = 0
        ring = journal.ring  # each step's ring fields found once for the round, not per sample
        self.fields = [
            ring.fields(op, name, shape, dtype, peer) if ring is not None else None
            for op, name, shape, dtype, peer in self.steps
        ]
        self.wrappers = _unwrapped(journal) if barrier[1] is not None else None
        self.on = self.wrappers is not None
        """Whether the round's samples are journaled per sample still (``end`` turns it off)."""

    def expect(self) -> None:
        """The sample's ops, ``entered``, each with the sequence number it will have."""
        j, want = self.journal, dict(self.seq)
        pending = []
        for (op, name, shape, dtype, peer), fields in zip(self.steps, self.fields):
            want[name] += 1
            pending.append(j.put(op, name, want[name], shape, dtype, peer, perf_counter(), fields))
        self.pending, self.want, self.written = pending, want, j.written

    def confirm(self, start: float, end: float) -> bool:
        """After the sample (``start``, ``end``: its clock reads): were its ops the pattern's (c10d's numbers moved
        as expected, no wrapper recorded an op)? Completes and counts them; ends the round's quiet journaling when
        they were not. Their times are the sample's: the barrier ends at its start, the ops span it."""
        j = self.journal
        got = _seqs(self.getters)
        clean = got == self.want and j.written == self.written
        barrier, *ops = self.pending
        barrier[7], barrier[9] = "completed" if clean else "unconfirmed", start
        for i, e in enumerate(ops):
            if clean:  # distinct starts (a trace tells ops apart by them), 1 ns apart
                e[8] = start + i * 1e-9
            e[7], e[9] = "completed" if clean else "unconfirmed", end
        for name, seq in got.items():
            j.count[name] = j.count.get(name, 0) + seq - self.seq[name]
            if self.p2p.get(name) and j.written == self.written:
                j.p2p[name] = j.p2p.get(name, 0) + self.p2p[name]
        self.seq, self.pending = got, []
        if not clean:
            self.end()
        return clean

    def fail(self, start: float | None) -> None:
        """The sample raised (an op timed out, a peer failed); ``start``: its clock read after the barrier (None:
        the barrier raised). Of its ops those c10d counted were issued, and the last of them is the one that failed
        (as the wrappers would have marked it); the others never were (``unconfirmed``)."""
        now, got = perf_counter(), _seqs(self.getters)
        barrier, *ops = self.pending
        if start is not None:
            barrier[7], barrier[9] = "completed", start
        for i, e in enumerate(ops if start is not None else self.pending):
            issued = e[2] <= got.get(e[1], -1)
            e[7] = ("failed" if e[2] == got[e[1]] else "completed") if issued else "unconfirmed"
            e[9] = now if issued else None
            if issued and start is not None:  # began in the sample, as ``confirm`` has it
                e[8] = start + i * 1e-9
        self.pending = []

    def end(self) -> None:
        """The journal's wrappers back on ``torch.distributed`` (where torch's own functions still are)."""
        if self.wrappers is None:
            return
        for name, fn in self.wrappers:
            if getattr(dist, name, None) is fn.__suite_original__:
                setattr(dist, name, fn)
        self.wrappers, self.on = None, False
