"""What each class of the planted faults does to a finished op's result: the one implementation of the classes,
applied by the dispatch mode over plain Gloo (suite/harness/plant/mode.py). The classes are listed, with what each
does, in suite/harness/plant/backend.py's docstring and docs/metrics.md; a class that cannot apply to an op leaves
it correct. The harness plants two of them in a case's buffers too (SUITE_INJECT_CORRUPTION, suite/harness/runner.py):
``flip`` and ``misroute``, the same function as the class.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

WRONG_OP = (
    (dist.ReduceOp.SUM, dist.ReduceOp.MAX),
    (dist.ReduceOp.AVG, dist.ReduceOp.SUM),
    (dist.ReduceOp.MAX, dist.ReduceOp.MIN),
    (dist.ReduceOp.MIN, dist.ReduceOp.MAX),
    (dist.ReduceOp.PRODUCT, dist.ReduceOp.SUM),
)
"""(asked, done instead) for wrong_reduction."""


def wrong_op(asked):
    """The reduction wrong_reduction does where ``asked`` was asked (``asked`` itself where none is listed)."""
    return next((done for a, done in WRONG_OP if asked == a), asked)


class Corrupter:
    """One group's faults: what a class does to the outputs (and inputs) of one of its finished ops, and what it
    keeps between ops (stale's first results, reorder's last receive)."""

    def __init__(self, n: int, ranks):
        self.n = n
        self._ranks = ranks  # () -> the group's global ranks (asked for only by group_rank)
        self._kept: dict = {}  # stale: the first result per (op, shapes, dtype)
        self._waiting: tuple | None = None  # reorder: (call, peer, shape, dtype, tensor) of the last receive

    @staticmethod
    def before(fault: str, outs: list) -> list | None:
        """What ``apply`` needs of ``outs`` taken before their op runs: their contents, for drop and partial."""
        return [t.clone() for t in outs] if fault in ("drop", "partial") else None

    def apply(self, fault: str, op: str, outs: list, before, ins: list) -> None:
        """``fault`` done to ``outs`` (``before``: their contents before the op, for drop and partial)."""
        if fault == "aliasing":
            scribble(ins, outs)
        if not outs:
            return
        n = self.n
        if fault == "drop":
            _chunks(outs, n)[-1].copy_(_chunks(before, n)[-1])
        elif fault == "partial":
            for t, b in zip(outs, before):
                flat, old = t.view(-1), b.view(-1)
                half = (flat.numel() + 1) // 2
                if flat.numel() > 1:
                    flat[half:].copy_(old[half:])
        elif fault == "stale":
            key = (op, tuple(tuple(t.shape) for t in outs), outs[0].dtype)
            if key in self._kept:
                for t, k in zip(outs, self._kept[key]):
                    t.copy_(k)
            else:
                self._kept[key] = [t.clone() for t in outs]
        elif fault == "misroute":
            misroute(outs, n)
        elif fault == "group_rank":
            parts, ranks = _chunks(outs, n), self._ranks()
            if len(parts) == len(ranks):
                _moved(parts, lambda j, _: ranks[j] % n)
        elif fault == "duplicate":
            parts = _chunks(outs, n)
            if len(parts) > 1 and parts[0].shape == parts[1].shape:
                parts[1].copy_(parts[0])
        elif fault == "overrun":
            t = outs[-1]
            first = _chunks([t], n)[0].reshape(-1)
            room = t.untyped_storage().nbytes() // t.element_size() - (t.storage_offset() + t.numel())
            k = min(room, first.numel())
            if k > 0 and t.is_contiguous():
                torch.as_strided(t, (k,), (1,), t.storage_offset() + t.numel()).copy_(first[:k])

    def reorder(self, call: int, src: int, t: torch.Tensor) -> None:
        """Swap this message with the previous one from the same peer in the same armed call, if any."""
        key = (call, src, tuple(t.shape), t.dtype)
        w = self._waiting
        if w is not None and w[:4] == key and w[4].data_ptr() != t.data_ptr():
            held = w[4].clone()
            w[4].copy_(t)
            t.copy_(held)
            self._waiting = None
        else:
            self._waiting = (*key, t)


def flip(outs: list) -> None:
    """Add 1 to the first element of the first output that has one."""
    for t in outs:
        if t is not None and t.numel():
            t.view(-1)[0] = t.view(-1)[0] + 1
            return


def misroute(outs: list, n: int) -> None:
    """The right values in the wrong place, as a wrong chunk, peer or buffer index would put them: the first outputs
    of one shape and dtype (two or more) each take the next one's contents; else the first output of two or more
    elements, its n parts (n: the group's size) each the next part's."""
    outs = [t for t in outs if t is not None and t.numel()]
    for t in outs:
        alike = [o for o in outs if o.shape == t.shape and o.dtype == t.dtype]
        if len(alike) > 1:
            return _moved(alike, lambda i, parts: (i + 1) % len(parts))
    for t in outs:
        if t.numel() > 1:
            return _moved(_chunks([t], n), lambda i, parts: (i + 1) % len(parts))


def _moved(parts: list, source) -> None:
    """Each part given the contents part ``source(i, parts)`` had (parts of one shape, at least two)."""
    if len(parts) > 1 and all(p.shape == parts[0].shape for p in parts):
        held = [p.clone() for p in parts]
        for i, p in enumerate(parts):
            p.copy_(held[source(i, parts)])


def _chunks(outs: list[torch.Tensor], n: int) -> list[torch.Tensor]:
    """The places a fault moves data between: the outputs when there are several, else one output's n
    parts (n: the group's size; at least one element each)."""
    outs = [t for t in outs if t is not None and t.numel()]
    if len(outs) != 1:
        return outs
    flat = outs[0].view(-1)
    c = flat.numel() // n
    if c < 1 or n < 2:
        return [flat[i : i + 1] for i in range(flat.numel())] if flat.numel() > 1 else [flat]
    return [flat[i * c : (i + 1) * c] for i in range(n)]


def scribble(ins: list, outs: list) -> None:
    """Write into each input that is not also an output (an in-place form): the output's data one element on,
    as an op using its input as scratch space would (no output: the input's own, one element on; a single
    element: negated)."""
    src = torch.cat([t.reshape(-1) for t in outs]) if outs else None
    for i in ins:
        if i is None or not i.numel() or _shares(i, outs):
            continue
        flat = i.view(-1)
        data = flat.clone() if src is None else src
        k = min(flat.numel(), data.numel())
        flat[:k].copy_(torch.roll(data, 1)[:k] if data.numel() > 1 else -data[:k])


def _shares(t: torch.Tensor, others) -> bool:
    """Whether ``t`` shares storage with any of ``others`` (an in-place form: its input is its output)."""
    ptr = t.untyped_storage().data_ptr()
    return any(o.untyped_storage().data_ptr() == ptr for o in others)
