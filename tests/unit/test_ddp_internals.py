"""DDP's private parts behind experiments/ddp/internals.py: what each gives on this torch, and what the
experiment records on a torch that lacks them (absent numbers, never guessed ones)."""

from __future__ import annotations

import importlib

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from experiments.ddp import cases as ddp_exp
from experiments.ddp import internals
from experiments.ddp.table import format_tables
from suite.harness.runner import Harness
from tests.helpers.inprocess import DDP_CFG, lone_group


class _DdpWithoutPrivates:
    """What a torch without DDP's logger and reducer accessors hands the adapter."""

    reducer = object()


def test_a_ddp_without_the_privates_gives_nothing_rather_than_a_guess(monkeypatch):
    lacking = _DdpWithoutPrivates()
    internals.sample_every_iteration(lacking)  # nothing to set: no error
    assert internals.logging_data(lacking) == {}
    assert internals.bucket_sizes(lacking) is None
    assert internals.bucket_sizes(object()) is None  # no reducer at all
    monkeypatch.delattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES", raising=False)
    try:
        assert importlib.reload(internals).FIRST_BUCKET_BYTES == 1024 * 1024  # torch's documented first bucket
    finally:
        monkeypatch.undo()
        importlib.reload(internals)
    assert internals.FIRST_BUCKET_BYTES == dist._DEFAULT_FIRST_BUCKET_BYTES


def test_this_torch_has_them_and_they_describe_a_real_ddp():
    with lone_group(DDP_CFG):
        model = DDP(nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 8)))
        internals.sample_every_iteration(model)
        for _ in range(2):
            model(torch.randn(4, 64)).sum().backward()
        data = internals.logging_data(model)
        assert data.get("bucket_cap_bytes", 0) > 0 and int(data.get("iteration", 0)) >= 1, sorted(data)
        sizes = internals.bucket_sizes(model)
        assert sizes and sum(sizes) == sum(p.numel() * 4 for p in model.parameters())


def test_the_experiment_records_absent_numbers_on_a_torch_without_them(monkeypatch):
    monkeypatch.setattr(internals, "logging_data", lambda ddp: {})
    monkeypatch.setattr(internals, "bucket_sizes", lambda ddp: None)
    monkeypatch.setattr(internals, "sample_every_iteration", lambda ddp: None)
    with lone_group(DDP_CFG) as ctx:
        case = next(
            c for c in ddp_exp.ddp_cases(DDP_CFG, 1) if c.identity["model"] == "mlp" and c.record_label == "ddp"
        )
        _, rec = Harness(ctx, DDP_CFG, env={}).run(case)
    assert rec["n_wrong"] == 0 and rec["time_us"] > 0
    assert (rec["n_buckets"], rec["bucket_sizes"], rec["bucket_cap_bytes"]) == (None, None, None)
    assert rec["ddp_logger_steps"] == 0 and "ddp_logger_comm_ms" not in rec
    assert "ddp" in format_tables([rec])  # the table still reads it
