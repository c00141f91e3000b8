"""A planted compute straggler for ``make validate-what-if``: SHARDED_MODEL factories of the example pipeline model
(examples/sharded_model.py ``build_pipeline``) whose every piece's forward sleeps, so that a rank's compute is
known and one rank's can be made k times longer without touching its communication.

    SHARDED_MODEL=examples.whatif_straggler:steady        every rank's forward: FORWARD_MS per step
    SHARDED_MODEL=examples.whatif_straggler:rank1x2       the same, and rank 1's forward 2x as long

A sleep holds no CPU and no lock: the straggler's communication threads run as fast as the others', where the
``slow`` injection (which stops the whole process) turns a stop inside an op into every rank's transfer. It also
keeps the truth the same on a loaded host or in containers sharing its cores. The sleep is the model's compute:
the pieces' own arithmetic (a few small Linears) is a small part of it, and is not slowed.
"""

from __future__ import annotations

import os
import re
import time

import torch.nn as nn

FORWARD_MS = 40.0
"""Each rank's forward per step (every piece once), in sleep: the pieces share it evenly."""
PIECES = 6
"""build_pipeline's pieces (a Linear in, four residual layers, a Linear out)."""
ROWS = 12
"""Samples per global batch: they split into 2, 3, 4 or 6 data-parallel shards (the example's 8 do not into 3)."""
NAME = re.compile(r"rank(\d+)x(\d+(?:\.\d+)?)")
"""``rank<r>x<k>``: the factory of rank r's forward k times as long."""


def batch(step: int):
    """The global batch of a step: ROWS samples, the same for the same step everywhere."""
    import torch

    from examples.sharded_model import WIDTH

    g = torch.Generator().manual_seed(step)
    return torch.randn(ROWS, WIDTH, generator=g), torch.randn(ROWS, WIDTH, generator=g)


class Sleepy(nn.Module):
    """A piece whose forward first sleeps its share of FORWARD_MS, ``factor`` times as long on rank ``slow``."""

    def __init__(self, inner: nn.Module, slow: int, factor: float) -> None:
        super().__init__()
        self.inner, self.slow, self.factor = inner, slow, factor

    def forward(self, x):
        k = self.factor if os.environ.get("RANK") == str(self.slow) else 1.0
        time.sleep(k * FORWARD_MS / PIECES / 1e3)
        return self.inner(x)


def build(slow: int = -1, factor: float = 1.0):
    """The example pipeline model, every piece sleepy (no tp_plan: its names no longer match), on ROWS samples."""
    import dataclasses

    from examples import sharded_model

    um = sharded_model.build_pipeline()
    m = um.module
    m.embed, m.head = Sleepy(m.embed, slow, factor), Sleepy(m.head, slow, factor)
    m.layers = nn.ModuleList(Sleepy(layer, slow, factor) for layer in m.layers)
    return dataclasses.replace(um, tp_plan=None, batch=batch)


def steady():
    """Every rank's forward FORWARD_MS per step."""
    return build()


def __getattr__(name: str):
    """``rank<r>x<k>``: a factory of the model with rank r's forward k times as long (k above 0)."""
    m = NAME.fullmatch(name)
    if m is None or not float(m[2]) > 0:
        raise AttributeError(name)
    return lambda: build(int(m[1]), float(m[2]))
