"""``pair_matrix``: the ping-pong of pingpong.py for every ordered pair (a, b) at the sweep's smallest and
largest size: the way to find a slow link. ``cross_node`` marks pairs on different hosts. The doctor's
latency probe declares it for its own pairs and size (``pair_latency_cases``)."""

from __future__ import annotations

from suite.case import Case
from suite.common.config import BenchConfig
from suite.ops.p2p.pattern import Pattern, Spec, Sweep, initiator
from suite.ops.p2p.pingpong import build, latency_cases, resolve


def pair_latency_cases(pairs: list[tuple[int, int]], size_bytes: int, dtype: str, *, experiment: str) -> list[Case]:
    """The pair-matrix ping-pong of each (src, dst) at one size."""
    return latency_cases(
        PATTERN,
        [
            Spec(pattern=PATTERN.name, variant=v, size_bytes=size_bytes, dtype=dtype, src=a, dst=b)
            for v in PATTERN.variants
            for a, b in pairs
        ],
        experiment=experiment,
    )


def _declare(cfg: BenchConfig, n: int, sw: Sweep, experiment: str) -> list[Case]:
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    return [c for sz in sw.ends for c in pair_latency_cases(pairs, sz, sw.dtype, experiment=experiment)]


PATTERN = Pattern(
    name="pair_matrix",
    variants=("send_recv",),
    build=build,
    declare=_declare,
    resolve=resolve,
    reported_ranks=initiator,
)
