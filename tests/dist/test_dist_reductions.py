"""suite.dist's cross-rank reductions (dist_max, dist_min) on a real three-rank Gloo group: element-wise,
the same answer on every rank."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from suite.dist import DistContext, dist_max, dist_min

WORLD = 3


def _rank(rank: int, store: str, out: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=60)
    )
    try:
        ctx = DistContext(
            rank=rank,
            world_size=WORLD,
            local_rank=rank,
            local_world_size=WORLD,
            backend="gloo",
            device=torch.device("cpu"),
            group=dist.group.WORLD,
            timeout_s=60,
        )
        got = {"max": dist_max(ctx, [rank, -rank, 0.5 * rank]), "min": dist_min(ctx, [rank, -rank, 10 - rank])}
        Path(out, f"{rank}.json").write_text(json.dumps(got))
    finally:
        dist.destroy_process_group()


def test_dist_max_and_dist_min_are_element_wise_over_the_ranks(tmp_path):
    mp.spawn(_rank, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=WORLD, join=True)
    for rank in range(WORLD):
        got = json.loads((tmp_path / f"{rank}.json").read_text())
        assert got == {"max": [2.0, 0.0, 1.0], "min": [0.0, -2.0, 8.0]}, (rank, got)
