"""The sharded experiment's strategies: one file each (its ``STRATEGY``, an experiments/sharded/strategy.py
record), one line each below. Adding a strategy is adding its file and its line; the README's table lists every
one (tests/unit/test_sharded_strategies.py checks it, and that no module outside this package compares a
strategy's name).

``STRATEGIES`` is the product's list, in the order the default run takes them; ``PLANTED`` the strategies wrong
on purpose (planted.py), run only when named."""

from __future__ import annotations

from ..strategy import Strategy
from . import ddp, fsdp2, fsdp2_bf16, fsdp2_keep, planted, pp_1f1b, pp_gpipe, pp_interleaved, sp, tp, two_d

STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        ddp.STRATEGY,
        fsdp2.STRATEGY,
        fsdp2_keep.STRATEGY,
        fsdp2_bf16.STRATEGY,
        tp.STRATEGY,
        sp.STRATEGY,
        two_d.STRATEGY,
        pp_gpipe.STRATEGY,
        pp_1f1b.STRATEGY,
        pp_interleaved.STRATEGY,
    )
}
PLANTED: dict[str, Strategy] = {s.name: s for s in planted.STRATEGIES}
BASELINE = ddp.STRATEGY.name
"""The strategy every other's bytes per step and peak memory are set against."""


def get(name: str) -> Strategy:
    """The strategy of that name, planted ones included; KeyError for an unknown name."""
    return STRATEGIES[name] if name in STRATEGIES else PLANTED[name]


def find(name: object) -> Strategy | None:
    """The strategy a stored record names, or None (a name this version does not know)."""
    return STRATEGIES.get(str(name)) or PLANTED.get(str(name))


def is_baseline(name: object) -> bool:
    """Whether a record's strategy is the baseline (``BASELINE``)."""
    return name == BASELINE
