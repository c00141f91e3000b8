"""One rank of a real Gloo group started by ``torch.multiprocessing.spawn`` (a file store), as the
suite's DistContext: the tests that call the suite's collectives directly, without torchrun."""

from __future__ import annotations

import contextlib
import datetime

import torch
import torch.distributed as dist

from suite.harness.dist import DistContext


@contextlib.contextmanager
def gloo_rank(rank: int, world: int, store: str, timeout_s: float = 60):
    """This process's rank of a ``world``-rank Gloo group on CPU; the group is destroyed after. One intra-op thread,
    as the launcher starts a rank (OMP_NUM_THREADS=1, torchrun's default): torch's default of one per core makes
    the ranks of one machine compete for its cores (the fault catalogue's steps ran 2 to 3 times slower on 2)."""
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{store}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    try:
        yield DistContext(
            rank=rank,
            world_size=world,
            local_rank=rank,
            local_world_size=world,
            backend="gloo",
            device=torch.device("cpu"),
            group=dist.group.WORLD,
            timeout_s=timeout_s,
            hostnames=["localhost"] * world,  # one host (what pair patterns ask of the layout)
        )
    finally:
        dist.destroy_process_group()
