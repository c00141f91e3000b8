"""Collectives: time, bandwidth and exact correctness of every torch.distributed collective.

The ops are the table in suite/ops/collectives.py (one ``Collective`` each: byte counts, inputs +
exact expected result + the call, the busbw factor); this experiment declares one
case per op, form, dtype, reduce op and size of the run's sweep. The harness
(suite/harness/runner.py) probes what the backend supports, times, checks the result of the
check run and of every timed buffer set, and records.

Sizes follow nccl-tests: ``size_bytes`` is the whole buffer of the collective (for
all_gather, reduce_scatter, all_to_all, gather, scatter: the per-rank chunk times the
world size), ``count`` is size_bytes / element size.
"""

from __future__ import annotations

from suite.api import Case, experiment_test
from suite.api import BenchConfig
from suite.api import sweep

EXPERIMENT = "collectives"


def cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Every collective of the op table over the run's sweep."""
    return sweep.collective_cases(cfg, world_size, experiment=EXPERIMENT)


test_collective = experiment_test(cases)
