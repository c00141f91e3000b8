"""Hello: an all_reduce (sum) of each rank's number plus one, at two sizes, checked exactly.

Declarations only: the harness (suite/runner.py) builds, runs, checks, times and records every case.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from suite.api import Buffers, Bytes, Case, experiment_test, restorer

EXPERIMENT = "hello"


def _build(count: int):
    def build(ctx) -> Buffers:
        x = torch.full((count,), float(ctx.rank + 1), device=ctx.device)
        want = ctx.world_size * (ctx.world_size + 1) / 2  # 1 + 2 + ... + n, exact in float32
        return Buffers(
            call=lambda async_op: dist.all_reduce(x, group=ctx.group, async_op=async_op),
            check=lambda: int((x != want).sum()),
            outputs=lambda: (x,),
            reset=restorer(x),  # all_reduce works in place: each sample starts from the same input
        )

    return build


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
                build=_build(count),
            )
        )
    return out


test_hello = experiment_test(cases)
