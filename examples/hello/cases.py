"""Hello: an all_reduce (sum) of each rank's number plus one, at two sizes, checked exactly.

Declarations only (what one rank runs is in workload.py): the harness (suite/harness/runner.py) builds, runs,
checks, times and records every case.
"""

from __future__ import annotations

from suite.api import Bytes, Case, experiment_test

from .workload import all_reduce_buffers

EXPERIMENT = "hello"


def cases(cfg, world_size: int) -> list[Case]:
    """Two all_reduce cases: HELLO_COUNT and four times HELLO_COUNT float32 elements."""
    out = []
    for multiple in (1, 4):
        count = multiple * cfg.hello.count
        out.append(
            Case(
                experiment=EXPERIMENT,
                op="all_reduce",
                label=f"all_reduce-{count}",
                identity={"multiple": multiple},  # of HELLO_COUNT; the record also has size_bytes and count
                bytes=Bytes(size_bytes=4 * count, count=count, dtype="float32", bw_op="all_reduce"),
                build=all_reduce_buffers(count),
            )
        )
    return out


test_hello = experiment_test(cases)
