"""The per-case sample budget (BUDGET_S) on a real four-rank Gloo group: the ranks stop at the same
sample and the same warm-up iteration (or the collectives would hang), decided on rank 0 from the slowest
rank's samples (and the warm-up from rank 0's time, which waited for the slowest rank inside the op)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from suite.common.config import BenchConfig
from suite.harness.budget import BUDGET_MIN_SAMPLES
from suite.harness.timing import measure
from tests.dist.local_group import gloo_rank

WORLD = 4
SLOW_RANK = 2  # not rank 0, the one that decides: it must decide from every rank's samples
SLOW_S = 0.15  # 20 x 0.15 s = 3 s > the 2 s budget: at most 13 samples fit


def _rank(rank: int, store: str, out: str) -> None:
    with gloo_rank(rank, WORLD, store) as ctx:
        t = torch.ones(4)

        def slow(async_op):
            if rank == SLOW_RANK:
                time.sleep(SLOW_S)
            return dist.all_reduce(t, async_op=async_op)

        def fast(async_op):
            return dist.all_reduce(t, async_op=async_op)

        cfg = BenchConfig(iters=20, warmup_iters=6, budget_s=2.0, heartbeat_timeout_s=0)
        got = {}
        for name, op, iters in (("slow", slow, None), ("fast", fast, None), ("explicit", slow, 12)):
            m = measure(ctx, cfg, op, iters=iters)
            got[name] = [m.iterations, m.iters_requested, m.stopped_by_budget, m.budget_s, m.samples_s, m.warmup_iters]
        Path(out, f"{rank}.json").write_text(json.dumps(got))


def test_a_slow_case_stops_early_on_every_rank_a_fast_one_and_an_explicit_count_do_not(tmp_path):
    mp.spawn(_rank, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=WORLD, join=True)
    got = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(WORLD)]
    assert all(g == got[0] for g in got)  # the same count and the same (cross-rank max) samples everywhere
    n, asked, stopped, budget, samples, warm = got[0]["slow"]
    assert BUDGET_MIN_SAMPLES <= n < 20 and (asked, stopped, budget) == (20, True, 2.0), got[0]["slow"][:4]
    assert min(samples) >= SLOW_S  # the slow rank's time is every sample's
    assert warm == 2  # 0.1 x 2 s holds one 0.15 s op, and the warm-up never goes below 2
    assert [got[0][k][5] for k in ("fast", "explicit")] == [6, 6]  # fast; no budget with an explicit count
    assert got[0]["fast"][:4] == [20, 20, False, 2.0]
    assert got[0]["explicit"][:4] == [12, 12, False, 0.0]  # a count asked for: exactly that, no budget
