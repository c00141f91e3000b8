"""The planted compute straggler of ``make validate-what-if`` (examples/whatif_straggler.py): a
SHARDED_MODEL factory per rank and factor, whose forward sleeps FORWARD_MS per step on every rank and k times as
long on the slow one, and computes what the example pipeline model computes."""

from __future__ import annotations

import pytest
import torch

from examples import sharded_model
from experiments.sharded.user_model import load
from suite.api import ConfigError
import examples.whatif_straggler as straggler


def _slept_ms(monkeypatch, name: str, rank: str) -> tuple[float, torch.Tensor]:
    """The sleeps of one forward of ``name``'s model on ``rank`` (ms), and its output on batch(0)."""
    slept: list[float] = []
    monkeypatch.setattr(straggler.time, "sleep", slept.append)
    monkeypatch.setenv("RANK", rank)
    um = load(f"examples.whatif_straggler:{name}")
    out = um.module(um.batch(0)[0])
    return 1e3 * sum(slept), out


@pytest.mark.parametrize("rank, forward_ms", [("0", straggler.FORWARD_MS), ("1", 2.5 * straggler.FORWARD_MS)])
def test_only_the_named_rank_sleeps_k_times_as_long(monkeypatch, rank, forward_ms):
    ms, out = _slept_ms(monkeypatch, "rank1x2.5", rank)
    assert ms == pytest.approx(forward_ms)
    torch.manual_seed(0)
    plain = sharded_model.build_pipeline()
    assert torch.equal(out, plain.module(straggler.batch(0)[0]))  # the sleep is all it adds


def test_the_steady_model_sleeps_alike_on_every_rank(monkeypatch):
    assert _slept_ms(monkeypatch, "steady", "1")[0] == pytest.approx(straggler.FORWARD_MS)


@pytest.mark.parametrize("name", ["rank1x0", "rank1", "slowest"])
def test_a_name_that_is_no_straggler_is_refused(name):
    with pytest.raises(ConfigError, match=f"has no function '{name}'"):
        load(f"examples.whatif_straggler:{name}")
