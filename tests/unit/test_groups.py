"""Pure parts of suite/harness/groups.py (the groups themselves are made on real Gloo groups in
tests/dist/test_backends_dist.py and tests/dist/test_misrouting_dist.py)."""

from __future__ import annotations

import datetime

import torch

from suite.harness.dist import DistContext
from suite.harness import groups


def _ctx(rank: int, hostnames: list[str]) -> DistContext:
    n = len(hostnames)
    return DistContext(
        rank=rank,
        world_size=n,
        local_rank=0,
        local_world_size=n,
        backend="gloo",
        device=torch.device("cpu"),
        group="world",
        timeout_s=42,
        hostnames=hostnames,
    )


def test_a_subgroup_context_numbers_ranks_and_hosts_from_the_member():
    ctx = _ctx(3, ["a", "a", "b", "b", "b"])
    sub = groups.sub_context(ctx, [0, 2, 3], "sub")
    assert (sub.rank, sub.world_size, sub.hostnames) == (2, 3, ["a", "b", "b"])
    assert (sub.local_rank, sub.local_world_size, sub.group) == (1, 2, "sub")
    assert (sub.backend, sub.device, sub.timeout_s) == ("gloo", torch.device("cpu"), 42)


def test_with_group_keeps_what_it_is_not_given():
    ctx = _ctx(1, ["a", "a"])
    same = groups.with_group(ctx, "g")
    assert (same.group, same.backend, same.device, same.rank) == ("g", "gloo", torch.device("cpu"), 1)
    other = groups.with_group(ctx, "n", backend="nccl", device=torch.device("meta"))
    assert (other.group, other.backend, other.device) == ("n", "nccl", torch.device("meta"))
    assert groups.timeout_of(ctx) == datetime.timedelta(seconds=42)
