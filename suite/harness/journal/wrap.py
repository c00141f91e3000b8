"""The journal's wrappers of ``torch.distributed``: which functions are wrapped, where each finds its group,
peer and ``async_op``, and the wrappers themselves (each call recorded by ``Journal.enter``)."""

from __future__ import annotations

import functools
from time import perf_counter

import torch.distributed as dist

from suite import op_table

OPS = {op.name: (op.group_at, op.async_at, op.peer) for op in op_table.OPS if not op.objects}
"""The functions wrapped (the op table's rows, suite/op_table.py): name -> (position of the group argument, of
async_op (None: always async (isend, irecv) or never), the p2p peer's keyword)."""
OBJECT_P2P = {op.name: (op.group_at, op.peer) for op in op_table.OPS if op.objects}
"""p2p ops made of sends or recvs that torch issues past the wrapped functions (distributed_c10d's own):
op -> (position of the group argument, the peer's keyword). torch.distributed.pipelining's stages exchange
their shapes with them on their first step."""
_ISSUES = frozenset(op.name for op in op_table.OPS if op.issues)


def wrap(journal, op: str, fn):
    group_at, async_at, peer_key = OPS[op]

    @functools.wraps(fn)
    def journaled(*args, **kwargs):
        group = kwargs.get("group", args[group_at] if len(args) > group_at else None)
        peer = kwargs.get(peer_key, args[1] if len(args) > 1 else None) if peer_key else None
        e = journal.enter(op, group, args[0] if args else None, peer)
        try:
            out = fn(*args, **kwargs)
        except BaseException:
            e[9] = perf_counter()
            e[7] = "failed"
            journal.uncount_if_not_issued(op, group, e)
            raise
        e[9] = perf_counter()  # returned: done, or (async) issued
        is_async = (async_at is None and op in _ISSUES) or (
            async_at is not None and kwargs.get("async_op", len(args) > async_at and args[async_at])
        )
        e[7] = "issued" if is_async else "completed"
        return out

    journaled.__suite_journaled__ = True
    journaled.__suite_journal__ = journal
    journaled.__suite_original__ = fn
    return journaled


def wrap_object_p2p(journal, op: str, fn):
    """``send_object_list`` / ``recv_object_list``: every op they move the group's sequence number by is
    p2p (a size and a payload); counted from the sequence number, as their inner sends are not wrapped."""
    group_at, peer_key = OBJECT_P2P[op]

    @functools.wraps(fn)
    def journaled(*args, **kwargs):
        group = kwargs.get("group", args[group_at] if len(args) > group_at else None)
        e = journal.enter(op, group, None, kwargs.get(peer_key, args[1] if len(args) > 1 else None))
        name, get = journal.known[group]
        before = get() if get is not None else None
        try:
            return fn(*args, **kwargs)
        finally:
            issued = 1 if before is None else int(get()) - int(before)
            journal.count[name] += issued - 1  # enter counted one
            journal.p2p[name] = journal.p2p.get(name, 0) + issued
            e[7], e[9] = "completed", perf_counter()

    journaled.__suite_journaled__ = True
    return journaled


def wrap_batch(journal, fn):
    @functools.wraps(fn)
    def journaled(p2p_op_list):
        entries, ahead = [], {}  # each op's number: the ops of the batch on its group before it (Gloo counts each)
        for p in p2p_op_list:
            n = ahead[p.group] = ahead.get(p.group, -1) + 1
            entries.append(journal.enter(getattr(p.op, "__name__", "P2POp"), p.group, p.tensor, p.peer, n))
        out = fn(p2p_op_list)
        done = perf_counter()
        for e in entries:
            e[7], e[9] = "issued", done
        return out

    journaled.__suite_journaled__ = True
    journaled.__suite_journal__ = journal
    journaled.__suite_original__ = fn  # the timed samples' blocks put torch's own back (journal/quiet.py)
    return journaled


def p2p_op_class(base):
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


def wrap_all(journal) -> None:
    """Put ``journal``'s wrappers on every ``torch.distributed`` op not wrapped yet (and its ``P2POp``)."""
    for op in OPS:
        fn = getattr(dist, op, None)
        if fn is not None and not getattr(fn, "__suite_journaled__", False):
            setattr(dist, op, wrap(journal, op, fn))
    for op in OBJECT_P2P:
        fn = getattr(dist, op, None)
        if fn is not None and not getattr(fn, "__suite_journaled__", False):
            setattr(dist, op, wrap_object_p2p(journal, op, fn))
    if not getattr(dist.batch_isend_irecv, "__suite_journaled__", False):
        dist.batch_isend_irecv = wrap_batch(journal, dist.batch_isend_irecv)
        dist.P2POp = p2p_op_class(dist.P2POp)
