"""Point-to-point: latency, bandwidth, the patterns people build with send/recv, and their pitfalls.

The patterns (ping-pong, pair matrix, window, ring, exchange/deadlock, producer, control, barrier cost,
batching), what each measures and how it is normalised are declared in suite/ops/p2p/ (one file per
pattern, as the collectives are in suite/ops/collectives.py); this experiment runs every one of them over
the run's sweep.
"""

from __future__ import annotations

from suite.case import experiment_test
from suite.ops.p2p import cases
from suite.ops.p2p.pattern import EXPERIMENT  # noqa: F401  (EXPERIMENT: the records' experiment name)

test_p2p = experiment_test(cases)
