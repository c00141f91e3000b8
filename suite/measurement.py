"""What the harness's timing loop (suite/harness/timing.py ``measure``) returns for one case: its samples, already
reduced across ranks, and how they were taken. The record (suite/results.py ``make_record``) is built from it and
the case protocol's hooks (suite/case.py) read it; it holds numbers only, so that neither needs torch nor the
harness to read one."""

from __future__ import annotations

import dataclasses

from suite import metrics


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measurement:
    """Samples of one case, already reduced across ranks."""

    samples_s: list[float]
    """Per-iteration time, seconds, cross-rank max; one entry per sample."""
    timing_mode: str
    ops_per_sample: int
    warmup_iters: int
    """Warm-up iterations run (fewer than ``warmup_requested`` where the budget bounded them)."""
    precision_reached: bool | None
    """Precision mode only: whether the CI target was met before the time cap."""
    precision_ci_pct: float | None = None
    """Precision mode only: the half-width of the median's CI, % of the median, at the level of the last
    look (``metrics.sequential_confidence``): what ``precision_reached`` compared with PRECISION."""
    timer: str = "host"
    """What clock took the samples: host (perf_counter) or cuda_event."""
    last_done_rank: list[int] | None = None
    """Per iteration: the rank whose time was the maximum (the sample): the one that finished last."""
    rank_median_s: list[float] | None = None
    """Per rank: the median over iterations of that rank's own times."""
    rank_samples_s: list[list[float]] | None = None
    """Every rank x iteration time, seconds (only when the run asks to keep them)."""
    late_arrival_rank: list[int] | None = None
    """Per iteration: the rank that entered the op last (the largest time from its barrier exit to its op
    call); the others waited for it inside the op."""
    late_arrival_by_s: list[float] | None = None
    """Per iteration: how much later than the median of the other ranks that rank entered the op, seconds
    (per sample: not divided by ``ops_per_sample`` nor by ``scaled``)."""
    rank_arrival_median_s: list[float] | None = None
    """Per rank: the median over iterations of its time from its barrier exit to its op call, seconds."""
    rank_arrivals_s: list[list[float]] | None = None
    """Every rank x iteration arrival, seconds (only when the run asks to keep the rank samples)."""
    buffer_sets: int = 1
    """Distinct buffer sets the in-flight ops of one sample used."""
    group_ranks: list[int] | None = None
    """Global rank of each position of ``rank_median_s`` and of the ``*_rank`` fields when the group is
    not the whole job (a subgroup) or only the ranks that take part are reported (``rank_fields_of``);
    None when they are the global ranks themselves."""
    graph_kernel_nodes: int | None = None
    """cuda_graph mode: kernel nodes of the captured graph (None when not counted: no cuda.bindings)."""
    budget_s: float = 0.0
    """The sample budget that applied to this case, seconds (0: none; see ``budget_count``)."""
    iters_requested: int | None = None
    """The samples asked for before the budget (``iterations`` is what was taken)."""
    stopped_by_budget: bool = False
    """Whether the budget cut the case short of ``iters_requested``."""
    warmup_requested: int | None = None
    """The warm-up iterations asked for (WARMUP, or the caller's count)."""

    @property
    def iterations(self) -> int:
        return len(self.samples_s)

    @property
    def median_s(self) -> float:
        return metrics.percentile(self.samples_s, 50)

    def scaled(self, divisor: float) -> "Measurement":
        """The same measurement with every time divided by ``divisor`` (e.g. round trip / 2)."""
        if divisor == 1:
            return self

        def div(xs):
            return None if xs is None else [x / divisor for x in xs]

        # arrivals stay per sample: they are the time before the op, not the op's
        return dataclasses.replace(
            self,
            samples_s=div(self.samples_s),
            rank_median_s=div(self.rank_median_s),
            rank_samples_s=None if self.rank_samples_s is None else [div(r) for r in self.rank_samples_s],
        )
