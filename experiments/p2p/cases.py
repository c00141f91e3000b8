"""Point-to-point: latency, bandwidth, the patterns people build with send/recv, and their pitfalls.

The patterns (ping-pong, pair matrix, window, ring, exchange/deadlock, producer, control, barrier cost,
batching), what each measures and how it is normalised are declared in suite/ops/p2p/ (one file per
pattern, as the collectives are in suite/ops/collectives.py); this experiment runs every one of them over
the run's sweep.
"""

from __future__ import annotations

from suite.api import Case, experiment_test
from suite.api import BenchConfig
from suite.api import p2p

EXPERIMENT = "p2p"


def cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Every pattern of suite/ops/p2p/ over the run's sweep."""
    return p2p.cases(cfg, world_size, experiment=EXPERIMENT)


test_p2p = experiment_test(cases)
