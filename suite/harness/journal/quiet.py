"""The timed samples journaled per block of samples, not per op: no journal work inside the timed region, and
none between two samples of a block but one store.

Recording an op (``Journal.enter``: its group's sequence number, the entry, the ring file) costs about a
microsecond or two per call, as much as a whole op on a one-rank MPI group: inside a sample it would be part of
what the suite reports. Recording and checking a sample's ops between two samples costs a few microseconds of CPU
there, work a bare loop does not do before its next op. So on the host clock's path (suite/harness/timing.py) the
journal keeps the timed samples this way:

- ``Watch`` notes the ops of the last untimed warm-up sample (the case's call as the samples issue it), through
  the wrappers as every other op. It is the *pattern* only when c10d's sequence number of every group it touched
  moved by exactly the ops the journal saw there (no op issued past the wrappers, such as DDP's reducer's).
- For each timed round ``Quiet`` puts torch's own functions back on ``torch.distributed`` (what the journal wrapped;
  a wrapper put above the journal's stays). Before the first sample of a block (``BLOCK`` samples, fewer where a
  sample issues many ops: a block's entries are at most half the journal's ring) it records the block's ops as the
  pattern says: per sample the barrier, then the call's ops, each with the sequence number it will have, in the
  state ``ahead`` (recorded before it is issued). Before each sample it notes the sample begun (``begin``: a
  count, and one store into the ring file).
- A hang in a sample finds its ops in the journal's dump and its ring file as the wrappers would have left them:
  which op, on which group, at which number, in which case. The block's ops past the sample begun were recorded
  ahead and never issued: the dump and the ring file leave them out; the samples before it are done and read as
  ``completed``. The in-flight op's start reads the end of the sample before it (the block's start for its
  first): the entries are the block's, their times the samples'.
- After the block's last sample c10d's sequence numbers say whether the block issued exactly those ops: then they
  are ``completed`` (each with its own sample's start and end) and counted (the p2p ops among them too, for the
  after-case check); if not (a rank that skipped or added an op, an op issued past the wrappers) the block's ops
  are ``unconfirmed`` (which of its samples broke the pattern is not told), c10d's count stands, and the round's
  remaining samples are journaled per op by the wrappers again.

Without a pattern (no warm-up, a group c10d keeps no count for, ops the journal did not see) every sample is
journaled per op, as everywhere else. What the per-op path keeps that this does not: each op's own start and end
(a timed op's entry spans its whole sample), and which sample of a block broke the pattern.
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


BLOCK = 64
"""Timed samples recorded at once, before the first of them, and checked at once, after the last. The record and
the check (a few dozen µs for a block of a one-op case) make the sample right after them about a microsecond
slower on a one-rank Gloo or MPI group (its median over rounds, against the block's other samples): blocks of 16
moved a round's median by +0.04 to +0.29 µs, of 64 by +0.00 to +0.09 (the suite's budget per op is 0.5 µs)."""
AHEAD = "ahead"
"""The state of a block's entry until the block is checked: recorded before it was issued (a dump reads it through
``Quiet.view``: left out until its sample is begun, ``entered`` while it runs, ``completed`` once it is done)."""


class Quiet:
    """One timed round's samples journaled per block (the module's doc): ``begin`` before each sample's barrier,
    ``done`` after it, ``fail`` where a sample raised, ``end`` once after the round (or at the first block that
    breaks the pattern)."""

    def __init__(self, journal, barrier_group, steps: list, block: int | None = None):
        barrier = journal.group_of(barrier_group)
        self.journal, self.getters = journal, _getters(journal)
        self.steps = [("barrier", barrier[0], None, None, None), *steps]
        self.width = len(self.steps)
        self.block = max(1, min(BLOCK if block is None else block, TAIL // 2 // self.width))
        self.seq = _seqs(self.getters)
        self.p2p = {name: sum(s[1] == name and s[0] in P2P for s in self.steps) for name in self.seq}
        self.per = {name: sum(s[1] == name for s in self.steps) for name in self.seq}
        self.pending: list = []  # the block's entries, sample by sample
        self.spans: list = []  # (start, end) of the block's samples done
        self.k = self.i = 0  # samples in the block, begun of them
        self.want: dict = {}
        self.written = 0
        self.ring = ring = journal.ring
        self.ring0 = 0  # the ring's write number before the block's first entry
        self.fields = [  # each step's ring fields found once for the round, not per sample
            ring.fields(op, name, shape, dtype, peer) if ring is not None else None
            for op, name, shape, dtype, peer in self.steps
        ]
        self.wrappers = _unwrapped(journal) if barrier[1] is not None else None
        self.on = self.wrappers is not None
        """Whether the round's samples are journaled per block still (``end`` turns it off)."""

    def begin(self, left: int) -> None:
        """Before a sample's barrier: a new block's ops recorded when the last block is done (at most ``left``
        samples, those the round has still to take), then this sample noted begun."""
        if self.i == self.k:
            self.expect(min(self.block, left))
        self.i += 1
        if self.ring is not None:
            self.ring.begun(self.ring0 + self.i * self.width)

    def expect(self, k: int = 1) -> None:
        """The ops of the block's ``k`` samples, ``ahead``, each with the sequence number it will have. The block
        is announced before its first entry is put (none begun; the ring file's plan covers the slots to come), so
        a dump or a fatal signal while they are put finds them recorded ahead, not issued."""
        j, want, now = self.journal, dict(self.seq), perf_counter()
        self.i, self.k, self.spans, self.pending = 0, k, [], []
        pending = self.pending
        if self.ring is not None:
            self.ring0 = self.ring.written
            self.ring.plan(self.ring0, self.ring0 + k * self.width)
        j.planned = self
        for _ in range(k):
            for (op, name, shape, dtype, peer), fields in zip(self.steps, self.fields):
                want[name] += 1
                pending.append(j.put(op, name, want[name], shape, dtype, peer, now, fields, AHEAD))
        self.want, self.written = want, j.written

    def done(self, start: float, end: float) -> bool:
        """After a sample (``start``, ``end``: its clock reads): noted; after the block's last, the block checked
        (``confirm``). False where that found the pattern broken."""
        self.spans.append((start, end))
        return self.confirm() if self.i == self.k else True

    def confirm(self) -> bool:
        """After the block's last sample: were its ops the pattern's (c10d's numbers moved as expected, no wrapper
        recorded an op)? Completes and counts them; ends the round's quiet journaling when they were not. Their
        times are their samples': a barrier from the end of the sample before (the block's start for the first)
        to its sample's start, the ops spanning the sample."""
        j = self.journal
        got = _seqs(self.getters)
        clean = got == self.want and j.written == self.written
        self._settle(self.spans, "completed" if clean else "unconfirmed", clean, self.pending)
        for name, seq in got.items():
            j.count[name] = j.count.get(name, 0) + seq - self.seq[name]
            if self.p2p.get(name) and j.written == self.written:
                j.p2p[name] = j.p2p.get(name, 0) + self.p2p[name] * self.k
        self.seq, self.pending, self.spans, self.k, self.i, j.planned = got, [], [], 0, 0, None
        if not clean:
            self.end()
        return clean

    def _settle(self, spans: list, state: str, timed: bool, entries: list) -> None:
        """The entries of the block's samples done (one ``spans`` each: start, end): ``state``, their times their
        samples' (the ops' starts only where ``timed``)."""
        w, prev = self.width, None
        for s, (start, end) in enumerate(spans):
            barrier, *ops = entries[s * w : (s + 1) * w]
            if prev is not None:
                barrier[8] = prev
            barrier[7], barrier[9] = state, start
            for i, e in enumerate(ops):
                if timed:  # distinct starts (a trace tells ops apart by them), 1 ns apart
                    e[8] = start + i * 1e-9
                e[7], e[9] = state, end
            prev = end

    def view(self, entries: list) -> list:
        """``entries`` (the journal's, in order) as a dump reads them while a block is under way (from another
        thread): the block's samples done ``completed``, the one begun as recorded (its start the end of the
        sample before), the ops recorded ahead of it left out (never issued). Copies: the journal's are kept."""
        pending, spans, i, w = list(self.pending), list(self.spans), self.i, self.width
        spans = spans[:i]
        copies = [list(e) for e in pending[: i * w]]
        self._settle(spans, "completed", True, copies)
        for e in copies[len(spans) * w :]:
            e[7] = "entered"
            if spans:
                e[8] = spans[-1][1]
        at = {id(e): n for n, e in enumerate(pending[: i * w])}
        out = []
        for e in entries:
            n = at.get(id(e))
            if n is not None:
                out.append(copies[n])
            elif e[7] != AHEAD:
                out.append(e)
        return out

    def fail(self, start: float | None) -> None:
        """A sample raised (an op timed out, a peer failed); ``start``: its clock read after the barrier (None:
        the barrier raised, or no sample was under way). The block's samples done are ``completed`` and counted;
        of the sample under way's ops those c10d counted were issued, and the last of them is the one that failed
        (as the wrappers would have marked it); the others never were (``unconfirmed``); the ops recorded ahead of
        it leave the journal (never issued)."""
        j = self.journal
        now, got, w, d = perf_counter(), _seqs(self.getters), self.width, len(self.spans)
        self._settle(self.spans, "completed", True, self.pending)
        for name, n in self.per.items():
            if n and d:
                j.count[name] = j.count.get(name, 0) + n * d
            if self.p2p.get(name) and d:
                j.p2p[name] = j.p2p.get(name, 0) + self.p2p[name] * d
        current = self.pending[d * w : (d + 1) * w] if d < self.i else []
        ops = current
        if current and start is not None:
            barrier, *ops = current
            barrier[7], barrier[9] = "completed", start
        for i, e in enumerate(ops):
            issued = e[2] <= got.get(e[1], -1)
            e[7] = ("failed" if e[2] == got[e[1]] else "completed") if issued else "unconfirmed"
            e[9] = now if issued else None
            if issued and start is not None:  # began in the sample, as ``confirm`` has it
                e[8] = start + i * 1e-9
        self._drop(self.pending[(d + 1 if current else d) * w :])
        self.pending, self.spans, self.k, self.i, j.planned = [], [], 0, 0, None

    def _drop(self, ahead: list) -> None:
        """The entries recorded ahead of the samples begun out of the journal (its ring file leaves them out)."""
        if not ahead:
            return
        j, ids = self.journal, {id(e) for e in ahead}
        j.entries = type(j.entries)((e for e in j.entries if id(e) not in ids), maxlen=j.entries.maxlen)
        kept = len(j.ops)
        j.ops[:] = [e for e in j.ops if id(e) not in ids]
        j.dropped -= len(ahead) - (kept - len(j.ops))
        for e in ahead:
            j.case_ops[e[0]] -= 1

    def end(self) -> None:
        """The journal's wrappers back on ``torch.distributed`` (where torch's own functions still are)."""
        if self.wrappers is None:
            return
        for name, fn in self.wrappers:
            if getattr(dist, name, None) is fn.__suite_original__:
                setattr(dist, name, fn)
        self.wrappers, self.on = None, False
