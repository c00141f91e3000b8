"""The ddp experiment's reference check waits in turns on a real two-rank Gloo group (experiments/ddp/compare.py
``in_turns``): rank 0's work more than twice as long as the collective timeout, and the other rank never times out
(it once waited in one broadcast for the whole reference, and a run of 600 steps outlasted Gloo's 60 s)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch.multiprocessing as mp

from experiments.ddp.compare import in_turns
from tests.dist.local_group import gloo_rank

TIMEOUT_S = 2.0
WORK_S = 5.0


def _rank(rank: int, store: str, out: str) -> None:
    with gloo_rank(rank, 2, store, timeout_s=TIMEOUT_S) as ctx:
        end = time.monotonic() + WORK_S
        turns = []

        def work(deadline: float) -> bool:  # rank 0's long work, done in slices until each deadline
            turns.append(deadline)
            time.sleep(max(0.0, min(deadline, end) - time.monotonic()))
            return time.monotonic() >= end

        in_turns(ctx, work if rank == 0 else None)
        Path(out, f"{rank}.json").write_text(json.dumps(len(turns)))


def test_the_other_ranks_wait_for_the_reference_in_turns_within_the_timeout(tmp_path):
    mp.spawn(_rank, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=2, join=True)
    assert json.loads((tmp_path / "0.json").read_text()) >= WORK_S / (TIMEOUT_S / 4) - 1
    assert json.loads((tmp_path / "1.json").read_text()) == 0
