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
  microsecond per call, no I/O.

After each case the harness calls ``agree`` (outside the timed region): the ranks
compare, through the rendezvous store (not a collective, which a rank out of step
would pair with the wrong op), how many collectives each issued on each group since
the previous check (the sequence numbers less the p2p ops the journal saw, since p2p
patterns are asymmetric by design). A difference raises ``Diverged`` on every rank.

On a hang the launcher (suite/launch/hang.py) asks every rank for a dump: a thread of the
rank writes ``<run>/hang/rank<r>.json`` (journal tail, live sequence numbers, every
thread's Python stack) when ``<run>/hang/request`` appears, and when the rank itself
records a failure. A fatal signal (Gloo's SIGABRT on a size mismatch) leaves only
faulthandler's stacks in ``<run>/hang/rank<r>.fatal``.
"""

from __future__ import annotations

import collections
import datetime
import faulthandler
import functools
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from suite.harness import c10d
from suite.harness.c10d import group_name, sequence_getter, sequence_number  # noqa: F401 (sequence_number: the journal's)
from suite.launch import flight_recorder
from suite.launch.fileio import write_json_atomic

TAIL = 64
"""Entries kept per rank (the ring buffer)."""
POLL_S = 0.25
"""How often a rank's journal thread looks for the launcher's dump request."""

# name -> (index of the group argument, index of async_op (None: always async / never), p2p peer argument)
_OPS = {
    **dict.fromkeys(("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "all_to_all"), (2, 3, None)),
    **dict.fromkeys(("reduce", "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter"), (3, 4, None)),
    "all_to_all_single": (4, 5, None),
    "barrier": (0, 1, None),
    **{op: (2, None, peer) for op, peer in (("send", "dst"), ("recv", "src"), ("isend", "dst"), ("irecv", "src"))},
}
P2P = frozenset({"send", "recv", "isend", "irecv"})
OBJECT_P2P = {"send_object_list": (2, "dst"), "recv_object_list": (2, "src")}
"""p2p ops made of sends or recvs that torch issues past the wrapped functions (distributed_c10d's own):
op -> (position of the group argument, the peer's keyword). torch.distributed.pipelining's stages exchange
their shapes with them on their first step."""


class Diverged(RuntimeError):
    """The ranks issued different numbers of collectives in a case (the same verdict on every rank)."""

    failure_kind = "divergence"


class CheckTimedOut(RuntimeError):
    """A rank did not reach the after-case sequence check in time (it hangs elsewhere)."""

    failure_kind = "peer_failure"


class Journal:
    """This rank's ring buffer of issued ops, its per-group counts, and its dump."""

    def __init__(self, rank: int, run_dir: str | None):
        self.rank, self.run_dir = rank, run_dir
        self.case = ""
        self.entries: collections.deque = collections.deque(maxlen=TAIL)
        self.groups: dict[str, object] = {"0": dist.group.WORLD}
        self._known: dict = {}  # group object (None: the default) -> (name, sequence getter)
        self.fatal_file = None  # hang/rank<r>.fatal, open for faulthandler's stacks on a fatal signal or SIGTERM
        self.count: dict[str, int] = {}  # ops journaled per group name (plain dicts: a Counter costs 3x)
        self.p2p: dict[str, int] = {}  # p2p ops journaled per group name
        self._checks: dict[str, int] = {}  # checks per case label (the store key: the same on every rank)
        self._store = None
        self._dumped_request = None
        self.case_ops: dict[str, int] = {}  # ops of the current case, by name
        self.exc: BaseException | None = None  # the exception this rank failed with (its frames: where it was)
        self._failed = False

    def set_case(self, case: str) -> None:
        self.case = case
        self.case_ops.clear()

    # --- recording (the hot path: no I/O, no locks) ---------------------------------------------

    def enter(self, op: str, group, first, peer) -> list:
        known = self._known.get(group)
        if known is None:  # a group seen for the first time
            g = dist.group.WORLD if group is None else group
            known = self._known[group] = (group_name(g), sequence_getter(g))
            self.groups[known[0]] = g
        name, get = known
        seq = get() if get is not None else None
        self.count[name] = self.count.get(name, 0) + 1
        self.case_ops[op] = self.case_ops.get(op, 0) + 1
        if op in P2P:
            self.p2p[name] = self.p2p.get(name, 0) + 1
        t = first[0] if isinstance(first, (list, tuple)) and first else first
        tensor = isinstance(t, torch.Tensor)
        # shape and dtype as torch gives them (immutable); made JSON only in a dump
        e = [
            op,
            name,
            None if seq is None else seq + 1,
            t.shape if tensor else None,
            t.dtype if tensor else None,
            peer,
            self.case,
            "entered",
            time.time(),
        ]
        self.entries.append(e)
        return e

    def _uncount_if_not_issued(self, op: str, group, e: list) -> None:
        """An op rejected before it reached the process group (a non-contiguous tensor) did not move c10d's
        sequence number: it must not count as issued either (the after-case check compares the two)."""
        name, get = self._known[group]
        if get is not None and e[2] is not None and get() == e[2] - 1:
            self.count[name] -= 1
            self.case_ops[op] -= 1
            if op in P2P:
                self.p2p[name] -= 1
            e[7] = "rejected"

    def wrap(self, op: str, fn):
        group_at, async_at, peer_key = _OPS[op]

        @functools.wraps(fn)
        def journaled(*args, **kwargs):
            group = kwargs.get("group", args[group_at] if len(args) > group_at else None)
            peer = kwargs.get(peer_key, args[1] if len(args) > 1 else None) if peer_key else None
            e = self.enter(op, group, args[0] if args else None, peer)
            try:
                out = fn(*args, **kwargs)
            except BaseException:
                e[7] = "failed"
                self._uncount_if_not_issued(op, group, e)
                raise
            is_async = (async_at is None and op in ("isend", "irecv")) or (
                async_at is not None and kwargs.get("async_op", len(args) > async_at and args[async_at])
            )
            e[7] = "issued" if is_async else "completed"
            return out

        journaled.__suite_journaled__ = True
        journaled.__suite_journal__ = self
        journaled.__suite_original__ = fn
        return journaled

    def wrap_object_p2p(self, op: str, fn):
        """``send_object_list`` / ``recv_object_list``: every op they move the group's sequence number by is
        p2p (a size and a payload); counted from the sequence number, as their inner sends are not wrapped."""
        group_at, peer_key = OBJECT_P2P[op]

        @functools.wraps(fn)
        def journaled(*args, **kwargs):
            group = kwargs.get("group", args[group_at] if len(args) > group_at else None)
            e = self.enter(op, group, None, kwargs.get(peer_key, args[1] if len(args) > 1 else None))
            name, get = self._known[group]
            before = get() if get is not None else None
            try:
                return fn(*args, **kwargs)
            finally:
                issued = 1 if before is None else int(get()) - int(before)
                self.count[name] += issued - 1  # enter counted one
                self.p2p[name] = self.p2p.get(name, 0) + issued
                e[7] = "completed"

        journaled.__suite_journaled__ = True
        return journaled

    def wrap_batch(self, fn):
        @functools.wraps(fn)
        def journaled(p2p_op_list):
            entries = [self.enter(getattr(p.op, "__name__", "P2POp"), p.group, p.tensor, p.peer) for p in p2p_op_list]
            out = fn(p2p_op_list)
            for e in entries:
                e[7] = "issued"
            return out

        journaled.__suite_journaled__ = True
        journaled.__suite_journal__ = self
        return journaled

    # --- the after-case check -----------------------------------------------------------------------

    def collectives(self) -> dict[str, int]:
        """Collectives issued per known group: c10d's count less the p2p ops journaled."""
        out = {}
        for name, g in self.groups.items():
            seq = sequence_number(g)
            out[name] = (self.count.get(name, 0) if seq is None else seq) - self.p2p.get(name, 0)
        return out

    def agree(self, ctx, case: str) -> None:
        """Raise ``Diverged`` (on every rank of the case alike) if its ranks have issued different numbers
        of collectives on a group they share; outside any timed region. Uses the rendezvous store.

        The ranks compared are those of the case's group (a subgroup case runs on its members only);
        the counts are cumulative since each group was created: at the same case, ranks that issued the
        same collectives have the same counts, whatever cases some of them sat out."""
        ranks = _global_ranks(ctx.group)
        if len(ranks) < 2 or self._connect(ctx) is None:
            return
        me = dist.get_rank()
        n = self._checks[case] = self._checks.get(case, 0) + 1
        key = f"check/{case}/{n}"
        self._store.set(f"{key}/{me}", json.dumps(self.collectives()))
        keys = [f"{key}/{r}" for r in ranks]
        try:
            self._store.wait(keys, datetime.timedelta(seconds=ctx.timeout_s))
        except Exception:
            missing = [r for r, k in zip(ranks, keys) if not self._store.check([k])]
            raise CheckTimedOut(
                f"Timed out waiting {ctx.timeout_s:.0f} s for rank(s) {', '.join(map(str, missing))} at the "
                f"sequence check after {case} (they are elsewhere: see the launcher's hang diagnosis)"
            ) from None
        problem = divergence({r: json.loads(self._store.get(k)) for r, k in zip(ranks, keys)}, case)
        if problem:
            raise Diverged(problem)

    def _connect(self, ctx):
        if self._store is None and "MASTER_ADDR" in os.environ:
            base = dist.TCPStore(
                os.environ["MASTER_ADDR"],
                int(os.environ["MASTER_PORT"]),
                ctx.world_size,
                is_master=False,
                timeout=datetime.timedelta(seconds=max(5.0, ctx.timeout_s)),
                wait_for_workers=False,
            )
            self._store = dist.PrefixStore("suite/journal", base)
        return self._store

    # --- the dump -----------------------------------------------------------------------------------

    def dump(self, reason: str, *, failed: bool = False) -> None:
        """Write ``<run>/hang/rank<r>.json``: journal tail, live counts, every thread's stack (best effort).

        The dump a rank leaves when it fails is kept: a later request would show it tearing down."""
        if not self.run_dir or (self._failed and not failed):
            return
        self._failed = self._failed or failed
        if flight_recorder_on():  # first: the launcher reads the dumps as soon as every journal is there
            dump_flight_recorder(flight_recorder.path(self.run_dir, self.rank))
        try:
            write_json_atomic(Path(self.run_dir) / "hang" / f"rank{self.rank}.json", self.snapshot(reason))
        except Exception:  # a dump must never raise in a failing rank
            pass

    def snapshot(self, reason: str) -> dict:
        main = threading.main_thread().ident
        names = {t.ident: t.name for t in threading.enumerate()}
        threads = [
            {
                "name": names.get(tid, str(tid)),
                "main": tid == main,
                "frames": [[f.filename, f.lineno, f.name] for f in traceback.extract_stack(frame)],
            }
            for tid, frame in sys._current_frames().items()
        ]
        if self.exc is not None and self.exc.__traceback__ is not None:  # where the main thread failed
            tb = traceback.extract_tb(self.exc.__traceback__)
            threads.insert(0, {"name": "failed", "main": True, "frames": [[f.filename, f.lineno, f.name] for f in tb]})
        fields = ("op", "group", "seq", "shape", "dtype", "peer", "case", "state", "time_unix")
        return {
            "rank": self.rank,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "reason": reason,
            "time_unix": time.time(),
            "case": self.case,
            "seq": {name: sequence_number(g) for name, g in self.groups.items()},
            "journaled": dict(self.count),
            "case_ops": dict(self.case_ops),
            "tail": [_entry_json(dict(zip(fields, e))) for e in list(self.entries)],
            "threads": threads,
        }

    def watch(self) -> None:
        """Start the thread that answers the launcher's dump request (``<run>/hang/request``)."""
        if not self.run_dir:
            return
        request = Path(self.run_dir) / "hang" / "request"

        def run():
            while True:
                time.sleep(POLL_S)
                try:
                    stamp = request.read_text()
                except OSError:
                    continue
                if stamp != self._dumped_request:
                    self._dumped_request = stamp
                    self.dump(f"requested by the launcher: {stamp.strip()}")

        threading.Thread(target=run, name="suite-journal", daemon=True).start()


def flight_recorder_on(env=os.environ) -> bool:
    """Whether torch's flight recorder records this process's collectives (a buffer size > 0, under the
    name of torch >= 2.9 or the older one; suite/launch/cli.py sets it for NCCL runs)."""
    size = env.get("TORCH_FR_BUFFER_SIZE") or env.get("TORCH_NCCL_TRACE_BUFFER_SIZE") or "0"
    return size.strip().isdigit() and int(size) > 0


def dump_flight_recorder(path: Path) -> bool:
    """Write this process's flight-recorder dump (torch's pickle, what NCCL writes on a timeout) to ``path``
    through a temp name; False where torch has no dump call (private API) or it fails. Without the entries'
    stack traces: symbolising them took 6.5 s for 60 entries here (torch 2.13, Gloo), longer than the
    launcher waits; the journal's own stacks say where the rank is."""
    try:
        raw = c10d.flight_recorder_dump()
        if raw is None:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp")
        tmp.write_bytes(raw)
        tmp.replace(path)
        return True
    except Exception:  # a dump must never raise in a failing rank
        return False


def _entry_json(e: dict) -> dict:
    if e["shape"] is not None:
        e["shape"] = list(e["shape"])
    if e["dtype"] is not None:
        e["dtype"] = str(e["dtype"]).removeprefix("torch.")
    return e


def divergence(counts: dict[int, dict], case: str) -> str | None:
    """The message naming the rank(s) whose collective counts differ, or None if all agree.

    ``counts[r]`` maps group name -> collectives global rank r has issued on it so far; a group a
    rank does not know (a subgroup it is not in) is not compared for that rank. Per group, the
    count most ranks have is the reference (ties: the lowest rank's); the others are named."""
    groups = sorted({g for c in counts.values() for g in c})
    for g in groups:
        have = {r: c[g] for r, c in sorted(counts.items()) if g in c}
        if len(set(have.values())) < 2:
            continue
        tally = collections.Counter(have.values())
        best = max(tally.values())
        first = next(r for r in have if tally[have[r]] == best)
        ref = have[first]
        odd = [r for r in have if have[r] != ref]
        same = [r for r in have if have[r] == ref]
        detail = "; ".join(f"rank {r} had issued {have[r]}" for r in odd)
        return (
            f"ranks diverged by the end of {case}: {detail} collective(s) on process group {g} where rank(s) "
            f"{','.join(map(str, same))} had issued {ref} (c10d's per-group sequence numbers; any later op on "
            f"this group would pair with the wrong partner)"
        )
    return None


def _global_ranks(group) -> list[int]:
    """The global ranks of ``group`` (the default group: every rank)."""
    if group is None or group is dist.group.WORLD:
        return list(range(dist.get_world_size()))
    return list(dist.get_process_group_ranks(group))


def _p2p_op_class(base):
    """P2POp accepting the journaled isend/irecv: torch checks ``op in [isend, irecv]`` against its own
    functions (and ``op is isend``), so the op is unwrapped; batch_isend_irecv journals each op itself."""

    def original(op):
        return op.__suite_original__ if getattr(op, "__suite_journaled__", False) else op

    class P2POp(base):
        __doc__ = base.__doc__

        def __new__(cls, op, *args, **kwargs):
            return base.__new__(cls, original(op), *args, **kwargs)

        def __init__(self, op, *args, **kwargs):
            super().__init__(original(op), *args, **kwargs)

    return P2POp


def record_cost_s(calls: int = 2000) -> float:
    """Seconds the journal adds to one op on this rank: a no-op wrapped as ``install`` wraps every
    ``torch.distributed`` function, less the bare no-op, per call (the median of 5 rounds of ``calls``).
    A throwaway journal on the default group: it reads c10d's sequence number as the real one does,
    and counts nothing of the run's. Every timed op includes this once (recorded as
    ``journal_us_per_op``)."""

    def noop(*args, **kwargs):
        return None

    wrapped = Journal(-1, None).wrap("all_reduce", noop)
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
    for op in _OPS:
        fn = getattr(dist, op, None)
        if fn is not None and not getattr(fn, "__suite_journaled__", False):
            setattr(dist, op, j.wrap(op, fn))
    for op in OBJECT_P2P:
        fn = getattr(dist, op, None)
        if fn is not None and not getattr(fn, "__suite_journaled__", False):
            setattr(dist, op, j.wrap_object_p2p(op, fn))
    if not getattr(dist.batch_isend_irecv, "__suite_journaled__", False):
        dist.batch_isend_irecv = j.wrap_batch(dist.batch_isend_irecv)
        dist.P2POp = _p2p_op_class(dist.P2POp)
    if run_dir:
        try:
            path = Path(run_dir) / "hang" / f"rank{rank}.fatal"
            path.parent.mkdir(parents=True, exist_ok=True)
            j.fatal_file = open(path, "w")  # noqa: SIM115 - open for the process's lifetime (faulthandler writes on a signal)
            faulthandler.enable(file=j.fatal_file, all_threads=True)
            # torchrun ends the other ranks with SIGTERM when one dies: their stacks show what they waited in
            faulthandler.register(signal.SIGTERM, file=j.fatal_file, all_threads=True, chain=True)
        except OSError:
            pass
    if run_dir and flight_recorder_on():  # NCCL's own dump on a timeout lands in <run>/failures/ (launch.py)
        Path(run_dir, "failures").mkdir(parents=True, exist_ok=True)
    j.watch()
    return j
