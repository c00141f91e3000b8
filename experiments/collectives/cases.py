"""Collectives: time, bandwidth and exact correctness of every torch.distributed collective.

The ops are the table in suite/ops/collectives.py (one ``Collective`` each: byte counts, inputs +
exact expected result + the call, the busbw factor); this experiment declares one
case per op, form, dtype, reduce op and size of the run's sweep. The harness
(suite/harness/runner.py) probes what the backend supports, times, checks the result of the
check run and of every timed buffer set, and records.

Sizes follow nccl-tests: ``size_bytes`` is the whole buffer of the collective (for
all_gather, reduce_scatter, all_to_all, gather, scatter: the per-rank chunk times the
world size), ``count`` is size_bytes / element size.

``COLLECTIVES_GROUPS=world,interleaved`` also runs each case on the world's even and odd halves at once
(experiments/collectives/settings.py): group ranks that are not global ranks, timed, checked and recorded across
the whole world (suite/harness/groups.py ``partition_context``); labels end in ``-interleaved``.
"""

from __future__ import annotations

from suite.api import Case, experiment_test
from suite.api import BenchConfig
from suite.api import sweep

EXPERIMENT = "collectives"


def cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Every collective of the op table over the run's sweep, on each of COLLECTIVES_GROUPS."""
    groups = cfg.collectives.groups
    out = sweep.collective_cases(cfg, world_size, experiment=EXPERIMENT) if "world" in groups else []
    if "interleaved" in groups:
        parts = [list(range(0, world_size, 2)), list(range(1, world_size, 2))]
        out += sweep.collective_cases(cfg, world_size, experiment=EXPERIMENT, partition=("interleaved", parts))
    return out


test_collective = experiment_test(cases)
