"""suite.harness.dist's cross-rank reductions (dist_max, dist_min) on a real three-rank Gloo group: element-wise,
the same answer on every rank."""

from __future__ import annotations

import json
from pathlib import Path

import torch.multiprocessing as mp

from suite.harness.dist import dist_max, dist_min
from tests.dist.local_group import gloo_rank

WORLD = 3


def _rank(rank: int, store: str, out: str) -> None:
    with gloo_rank(rank, WORLD, store) as ctx:
        got = {"max": dist_max(ctx, [rank, -rank, 0.5 * rank]), "min": dist_min(ctx, [rank, -rank, 10 - rank])}
        Path(out, f"{rank}.json").write_text(json.dumps(got))


def test_dist_max_and_dist_min_are_element_wise_over_the_ranks(tmp_path):
    mp.spawn(_rank, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=WORLD, join=True)
    for rank in range(WORLD):
        got = json.loads((tmp_path / f"{rank}.json").read_text())
        assert got == {"max": [2.0, 0.0, 1.0], "min": [0.0, -2.0, 8.0]}, (rank, got)
