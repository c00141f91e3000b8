"""Per-rank op journal: what this rank issued to torch.distributed, and where it is now.

A hung job is most often one rank somewhere else: it skipped a collective, entered
another one, or is stuck in its own code, while the others wait. Two facts name it:

- c10d's own per-group sequence number (``sequence_number``): how many ops this rank
  issued on a group. It counts below the harness (a skip inside user or library code
  shows), collectives and p2p alike (measured on torch 2.13 Gloo: ``send``/``recv``
  and each op of ``batch_isend_irecv`` count one each, ``new_group`` counts none).
- the journal: ``install`` wraps the ``torch.distributed`` functions once per rank, and
  each call appends one small entry (op, group, its sequence number, first tensor's
  shape and dtype, p2p peer, the case, entered/completed) to a ring buffer: about a
  microsecond per call, no I/O. Inside a timed sample on the host clock it records nothing: the harness's
  timing loop has it record a block of samples' ops before the block and check them after it, and between two
  samples note one begun (journal/quiet.py).

Each entry also keeps when the call began and returned (``time.perf_counter``), and the entries of the
first ``timeline.OPS_PER_CASE`` ops of each case (at most ``timeline.OPS_MAX``) stay in ``ops`` for the
run's timeline (suite/harness/journal/timeline.py): one more clock read and one list append per call.

After each case the harness calls ``journal_check.agree`` (outside the timed region): the ranks
compare, through the rendezvous store (not a collective, which a rank out of step
would pair with the wrong op), how many collectives each issued on each group since
the previous check (the sequence numbers less the p2p ops the journal saw, since p2p
patterns are asymmetric by design). A difference raises ``Diverged`` on every rank.

On a hang the launcher's diagnosis (suite/postmortem/hang.py) asks every rank for a dump: a thread of the
rank writes ``<run>/hang/rank<r>.json`` (journal tail, live sequence numbers, every
thread's Python stack) when ``<run>/hang/request`` appears, and when the rank itself
records a failure. A fatal signal (Gloo's SIGABRT on a size mismatch) leaves only
faulthandler's stacks in ``<run>/hang/rank<r>.fatal``.

This module holds the journal itself (its entries and counts), ``install`` and ``current``; wrap.py wraps
the ``torch.distributed`` functions, check.py is the after-case check, dump.py the dumps, quiet.py the
timed samples journaled per block of samples, timeline.py this rank's part of the run's timeline.
"""

from __future__ import annotations

import collections
import tempfile
import time
from pathlib import Path
from time import perf_counter

import torch
import torch.distributed as dist

from suite.harness.journal import timeline

import suite.harness.journal.dump as journal_dump

import suite.harness.journal.wrap as journal_wrap
from suite.common import journal_ring
from suite import op_table
from suite.harness.c10d import group_name, sequence_getter

TAIL = 256
"""Entries kept per rank (the ring buffer)."""
P2P = frozenset(op.name for op in op_table.OPS if op.peer is not None and not op.objects)
"""The p2p rows of the op table whose calls are counted here (an object list's, by its sequence numbers)."""


class Journal:
    """This rank's ring buffer of issued ops, its per-group counts, and the state its check and dump keep."""

    def __init__(self, rank: int, run_dir: str | None):
        self.rank, self.run_dir = rank, run_dir
        self.case = ""
        self.entries: collections.deque = collections.deque(maxlen=TAIL)
        self.groups: dict[str, object] = {"0": dist.group.WORLD}
        self.known: dict = {}  # group object (None: the default) -> (name, sequence getter)
        self.fatal_file = None  # hang/rank<r>.fatal, open for faulthandler's stacks on a fatal signal or SIGTERM
        self.ring = None  # hang/rank<r>.ring: the entries as a fatal signal leaves them (suite/common/journal_ring.py)
        self.count: dict[str, int] = {}  # ops journaled per group name (plain dicts: a Counter costs 3x)
        self.p2p: dict[str, int] = {}  # p2p ops journaled per group name
        self.checks: dict[str, int] = {}  # checks per case label (the store key: the same on every rank)
        self.store = None  # the rendezvous store's client of the after-case check (journal_check.connect)
        self.dumped_request = None  # the launcher's last dump request answered (journal_dump.watch)
        self.case_ops: dict[str, int] = {}  # ops of the current case, by name
        self.exc: BaseException | None = None  # the exception this rank failed with (its frames: where it was)
        self.failed = False  # this rank has left the dump of its failure (journal_dump.dump keeps it)
        self.unix_minus_clock = time.time() - perf_counter()  # an entry's perf_counter time + this: Unix time
        self.ops: list = []  # the entries kept for the timeline (suite/harness/journal/timeline.py), in order
        self.room = timeline.OPS_PER_CASE  # how long ``ops`` may grow before this case's further ops are dropped
        self.dropped = 0  # ops of the current case past ``room``
        self.written = 0  # entries put since the start (the timed samples' check that no wrapper recorded one)
        self.planned = None  # the timed block under way, its ops recorded ahead (journal/quiet.py), or None
        self.timeline = timeline.Timeline(self)

    def set_case(self, case: str) -> None:
        self.timeline.case_ended(self.case, self.dropped)
        self.case, self.dropped = case, 0
        self.case_ops.clear()
        if self.ring is not None:
            self.ring.case(case)
        self.room = min(len(self.ops) + timeline.OPS_PER_CASE, timeline.OPS_MAX)

    # --- recording (the hot path: no I/O, no locks) ---------------------------------------------

    def group_of(self, group) -> tuple:
        """(its name, its c10d sequence getter or None) of ``group`` as an op was passed it (None: the default)."""
        known = self.known.get(group)
        if known is None:  # a group seen for the first time
            g = dist.group.WORLD if group is None else group
            known = self.known[group] = (group_name(g), counted_by_c10d(g))
            self.groups[known[0]] = g
        return known

    def enter(self, op: str, group, first, peer, before: int = 0) -> list:
        """One op called (its entry, ``entered``), at the sequence number it will have: ``before``: ops on the same
        group entered ahead of it and not issued yet (a batch's, all entered before torch issues the first)."""
        name, get = self.group_of(group)
        seq = get() if get is not None else None
        self.count[name] = self.count.get(name, 0) + 1
        if op in P2P:
            self.p2p[name] = self.p2p.get(name, 0) + 1
        t = first[0] if isinstance(first, (list, tuple)) and first else first
        tensor = isinstance(t, torch.Tensor)
        # shape and dtype as torch gives them (immutable); made JSON only in a dump; the call's start and end
        # (set by the wrapper when it returns) on this process's perf_counter
        seq = None if seq is None else seq + 1 + before
        return self.put(op, name, seq, t.shape if tensor else None, t.dtype if tensor else None, peer, perf_counter())

    def put(self, op: str, name: str, seq, shape, dtype, peer, clock: float, fields=None, state="entered") -> list:
        """One entry, ``entered`` at ``clock``: in the ring buffer, the ring file and the timeline's ops (the
        wrappers' ``enter``; suite/harness/journal/quiet.py for the ops of a block of timed samples, before it,
        with each op's ring ``fields`` found once, ``state`` "ahead": recorded before it is issued)."""
        n = self.case_ops[op] = self.case_ops.get(op, 0) + 1
        e = [op, name, seq, shape, dtype, peer, self.case, state, clock, None]
        self.entries.append(e)
        self.written += 1
        if self.ring is not None:
            self.ring.put(op, name, seq, shape, dtype, peer, n, clock, fields)
        if len(self.ops) < self.room:
            self.ops.append(e)
        else:
            self.dropped += 1
        return e

    def uncount_if_not_issued(self, op: str, group, e: list) -> None:
        """An op rejected before it reached the process group (a non-contiguous tensor) did not move c10d's
        sequence number: it must not count as issued either (the after-case check compares the two)."""
        name, get = self.known[group]
        if get is not None and e[2] is not None and get() == e[2] - 1:
            self.count[name] -= 1
            self.case_ops[op] -= 1
            if op in P2P:
                self.p2p[name] -= 1
            e[7] = "rejected"

    def issued(self, entries: list) -> list:
        """``entries`` (in order) as a dump reads them: while a timed block is under way, without its ops recorded
        ahead of the sample begun, and its samples done completed (journal/quiet.py ``Quiet.view``)."""
        planned = self.planned
        return entries if planned is None else planned.view(entries)

    def dump(self, reason: str, *, failed: bool = False) -> None:
        """Write ``<run>/hang/rank<r>.json`` (suite/harness/journal/dump.py), then this rank's part of the timeline."""
        journal_dump.dump(self, reason, failed=failed)


def counted_by_c10d(group):
    """``group``'s sequence-number getter (suite/harness/c10d.py), or None where its backend keeps none (torch's
    fake process group raises "does not yet support sequence numbers"): the journal's own count stands in."""
    get = sequence_getter(group)
    try:
        get is not None and get()
    except Exception:
        return None
    return get


def record_cost_s(calls: int = 2000) -> float:
    """Seconds the journal adds to one op on this rank: a no-op wrapped as ``install`` wraps every
    ``torch.distributed`` function, less the bare no-op, per call (the median of 5 rounds of ``calls``).
    A throwaway journal on the default group: it reads c10d's sequence number as the real one does,
    keeps its ring in a file where the real one does (suite/common/journal_ring.py), and counts nothing of the run's.
    Every timed op includes this once (recorded as ``journal_us_per_op``)."""

    def noop(*args, **kwargs):
        return None

    with tempfile.TemporaryDirectory() as tmp:
        j = Journal(-1, None)
        real = current()
        if real is not None and real.ring is not None:
            j.ring = journal_ring.Ring(Path(tmp) / "ring", "", 0.0)
        return _cost(journal_wrap.wrap(j, "all_reduce", noop), noop, calls)


def _cost(wrapped, noop, calls: int) -> float:
    t = torch.zeros(1)
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            noop(t, group=None, async_op=False)
        t1 = time.perf_counter()
        for _ in range(calls):
            wrapped(t, group=None, async_op=False)
        t2 = time.perf_counter()
        rounds.append(((t2 - t1) - (t1 - t0)) / calls)
    return max(0.0, sorted(rounds)[len(rounds) // 2])


def current() -> Journal | None:
    """The journal ``install`` put on this process's ``torch.distributed`` ops, None before: it is kept on
    the wrapped ops themselves (one per process, as long as they are wrapped), not in a module global."""
    return getattr(dist.all_reduce, "__suite_journal__", None)


def install(rank: int, run_dir: str | None) -> Journal:
    """Journal every ``torch.distributed`` op of this process (once), watch for dump requests, and leave
    faulthandler's stacks in ``<run>/hang/rank<r>.fatal`` on a fatal signal."""
    j = current()
    if j is not None:
        return j
    j = Journal(rank, run_dir)
    journal_wrap.wrap_all(j)
    journal_dump.arm(j)
    return j
