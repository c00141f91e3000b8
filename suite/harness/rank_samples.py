"""Every rank's samples of a case, agreed: gathered on every rank, reduced to the slowest rank per sample, and
the decisions rank 0 takes for all (how many more samples, whether to stop) broadcast, so every rank runs the
same count and no collective is left waiting (suite/harness/timing.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from suite import metrics
from suite.harness.dist import DistContext


@dataclass(frozen=True)
class RankSamples:
    """Every rank's samples and arrivals of one round, gathered: ``per_rank[r][i]``, ``arrivals[r][i]``."""

    per_rank: list[list[float]]
    arrivals: list[list[float]]

    def merge(self, other: "RankSamples") -> "RankSamples":
        return RankSamples(
            [a + b for a, b in zip(self.per_rank, other.per_rank)],
            [a + b for a, b in zip(self.arrivals, other.arrivals)],
        )


def gather_ranks(ctx: DistContext, got: tuple[list[float], list[float]]) -> RankSamples:
    """All ranks' samples and arrivals on every rank (one all_gather; every rank has the same count)."""
    samples, arrivals = got
    t = torch.tensor(samples + arrivals, dtype=torch.float64, device=ctx.device)
    out = [torch.empty_like(t) for _ in range(ctx.world_size)]
    dist.all_gather(out, t, group=ctx.group)
    rows = [o.cpu().tolist() for o in out]
    n = len(samples)
    return RankSamples([r[:n] for r in rows], [r[n:] for r in rows])


def broadcast_int(ctx: DistContext, value: int) -> int:
    """Rank 0's ``value`` on every rank (so every rank takes the same number of samples)."""
    t = torch.tensor([value], dtype=torch.int64, device=ctx.device)
    dist.broadcast(t, src=0, group=ctx.group)
    return int(t.item())


def broadcast_flag(ctx: DistContext, flag: bool) -> bool:
    t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=ctx.device)
    dist.broadcast(t, src=0, group=ctx.group)
    return bool(t.item())


def group_ranks(ctx: DistContext, positions: Sequence[int] | None = None) -> list[int] | None:
    """Global ranks of the per-rank fields' positions (the group's, or ``positions`` of it), or None when
    they are the whole job's ranks in order."""
    whole = ctx.group is None or ctx.group is dist.group.WORLD
    pos = list(range(ctx.world_size)) if positions is None else list(positions)
    ranks = pos if whole else [dist.get_global_rank(ctx.group, r) for r in pos]
    return None if ranks == list(range(dist.get_world_size())) else ranks


def max_over_ranks(got: RankSamples) -> list[float]:
    return [max(col) for col in zip(*got.per_rank)]


def per_rank_fields(ctx: DistContext, got: RankSamples, positions: Sequence[int] | None, keep: bool) -> dict:
    """The Measurement's per-rank fields over ``positions`` (None: every rank): who finished last and who arrived
    last in each sample (and by how much), each rank's median time and arrival, their samples where ``keep``."""
    mine = list(range(ctx.world_size)) if positions is None else list(positions)
    per_rank, arrivals = [got.per_rank[r] for r in mine], [got.arrivals[r] for r in mine]
    late, late_by = metrics.last_per_sample(arrivals)
    return {
        "last_done_rank": metrics.last_per_sample(per_rank)[0],
        "rank_median_s": [metrics.percentile(r, 50) for r in per_rank],
        "rank_samples_s": per_rank if keep else None,
        "late_arrival_rank": late,
        "late_arrival_by_s": late_by,
        "rank_arrival_median_s": [metrics.percentile(r, 50) for r in arrivals],
        "rank_arrivals_s": arrivals if keep else None,
        "group_ranks": group_ranks(ctx, positions),
    }
