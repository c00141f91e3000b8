"""The harness's planted divergence below the harness, on ``torch.distributed`` itself
(SUITE_INJECT_DIVERGE=...@below). Its grammar is suite/common/faults.py; what it does, docs/failures.md;
suite/harness/runner.py plants it (the damage SUITE_INJECT_CORRUPTION does to a case's buffers is
suite/harness/plant/corruptions.py's)."""

from __future__ import annotations

import functools
import time

import torch
import torch.distributed as dist

from suite.common import faults
from suite.harness.c10d import completed_work


class Below:
    """SUITE_INJECT_DIVERGE=<action>:<rank>:<k>[:<name>...]@below on its rank: ``torch.distributed.<op>`` (the
    case's op, or all_reduce where that names no function of it) wrapped above the journal's wrapper, so the
    journal sees only what is issued, as with a skip in an experiment or a library. The k-th call of it
    within a matching case, counted from the case's set-up with the harness's own calls (a support probe, the
    check run, its reductions) included, does ``action`` instead (``Harness._diverging``'s actions). One per
    harness; ``arm`` at each case's set-up."""

    def __init__(self):
        self.k = self.n = 0
        self.action = ""
        self.wrapped: dict = {}  # op name -> the function it wrapped

    def arm(self, inj, ctx, case) -> None:
        self.k, self.n = 0, 0  # disarmed: a case the switch does not pick
        if inj is None or inj.when != "below" or inj.rank != ctx.rank or not faults.targets(inj.name, case):
            return
        op = case.op if callable(getattr(dist, case.op, None)) else "all_reduce"
        if op not in self.wrapped:
            self.wrapped[op] = getattr(dist, op)
            setattr(dist, op, functools.wraps(self.wrapped[op])(lambda *a, _op=op, **kw: self._call(_op, a, kw)))
        self.k, self.action = inj.k, inj.action

    def _call(self, op: str, args: tuple, kwargs: dict):
        fn = self.wrapped[op]
        if self.k:
            self.n += 1
        if not self.k or self.n != self.k:
            return fn(*args, **kwargs)
        group, t = kwargs.get("group"), args[0] if args else kwargs.get("tensor")
        device = t.device if isinstance(t, torch.Tensor) else torch.device("cpu")
        if self.action in ("extra", "stray"):  # the call, then one more (left in flight: stray)
            out = fn(*args, **kwargs)
            fn(*args, **{**kwargs, "async_op": self.action == "stray"})
            return out
        if self.action == "sleep":
            time.sleep(3600)
        elif self.action == "other":
            dist.broadcast(torch.zeros(1, device=device), src=0, group=group)
        elif self.action == "size":
            n = t.numel() if isinstance(t, torch.Tensor) else 1
            dist.all_reduce(torch.zeros(n + 1, dtype=getattr(t, "dtype", None), device=device), group=group)
        elif self.action == "recv":
            dist.recv(torch.zeros(1, device=device), src=(dist.get_rank() + 1) % dist.get_world_size(), group=group)
        return completed_work() if kwargs.get("async_op") else None
