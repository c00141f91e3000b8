"""Ranks in the test process itself: a one-rank Gloo group (``lone_group``) and the small configurations the
in-process tests run under (the unit tier's ``ctx`` fixture, tests/unit/conftest.py, is one such group)."""

from __future__ import annotations

import contextlib
import os
from suite.common.config import BenchConfig, build_config
from suite.harness.dist import destroy_distributed, init_distributed


CFG = BenchConfig(iters=4, warmup_iters=1, min_bytes=64, max_bytes=256, heartbeat_timeout_s=0)
"""The harness's in-process tests' configuration (the unit tier's ``ctx`` group is started with it)."""
DDP_CFG = build_config(iters=3, warmup_iters=1, heartbeat_timeout_s=0, ddp={"params": 100_000, "accum": 2})
"""The DDP experiment's in-process tests' configuration: a 100K-parameter model, 2 accumulation steps."""


@contextlib.contextmanager
def lone_group(cfg: BenchConfig):
    """A one-rank Gloo group in this process (no launcher variables), destroyed afterwards."""
    saved = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS"):
        os.environ.pop(k, None)
    c = init_distributed(cfg)
    try:
        yield c
    finally:
        destroy_distributed(c)
        os.environ.clear()
        os.environ.update(saved)
