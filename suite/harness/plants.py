"""The harness's planted faults that act on a case's buffers (SUITE_INJECT_CORRUPTION's damage) or below the
harness, on ``torch.distributed`` itself (SUITE_INJECT_DIVERGE=...@below). Their grammar is
suite/harness/faults.py; what each does, docs/failures.md; suite/harness/runner.py plants them."""

from __future__ import annotations

import torch

from suite.case import Buffers


def flip(b: Buffers) -> None:
    for t in b.outputs():
        if t is not None and t.numel():
            t.view(-1)[0] = t.view(-1)[0] + 1
            return


def misroute(b: Buffers, world_size: int) -> None:
    """Deliver the right values to the wrong place: swap the first two outputs of one shape (two
    chunks or messages trade places), else rotate the first output of two or more elements by one
    chunk, as a wrong chunk or peer index would."""
    outs = [t for t in b.outputs() if t is not None and t.numel()]
    for i, a in enumerate(outs):
        for other in outs[i + 1 :]:
            if other.shape == a.shape and other.dtype == a.dtype:
                held = a.clone()
                a.copy_(other)
                other.copy_(held)
                return
    for t in outs:
        n = t.numel()
        if n >= 2:
            chunk = n // world_size
            t.copy_(torch.roll(t.reshape(-1), chunk if 0 < chunk < n else 1).view_as(t))
            return
