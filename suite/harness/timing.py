"""The one timing loop of the suite.

Every experiment hands ``measure`` a callable that issues one operation; the
harness owns warm-up, the timed iterations, synchronisation and the cross-rank
reduction of the samples. Rounds and iteration counts are identical on every
rank (precision mode decides on rank 0 and broadcasts), so a collective can
never be left waiting for a rank that stopped early.

Timing modes (recorded with every result, because tools disagree mostly on this):

- ``blocking``: ranks align on a barrier, then each sample is one op issued and
  completed (``wait()`` + device sync). Per-op latency as OSU reports it.
- ``pipelined``: ``depth`` ops are issued back to back (``async_op=True``), then
  all are waited for and the device synced; sample = elapsed / depth. This is
  nccl-tests' default and shows the throughput when ops overlap.
- ``cuda_graph`` (NCCL on CUDA only): ``depth`` blocking ops are captured once
  into a ``torch.cuda.CUDAGraph``; a sample is one replay / depth. Replaying
  removes the per-op CPU launch cost, which dominates small-message latency
  (nccl-tests ``-G``; NVIDIA/nccl#1984: ~0.5 us with graphs vs ~3.5 us without).

Clocks (``timer`` in the record, defined in ``timer_definition``): on CPU a sample is
host time (``time.perf_counter``) from the barrier's return to the op(s) completed
(``wait()``, device synced), the host's cost of issuing the op included. On CUDA it is
the time between two CUDA events recorded on the current stream around the op(s), as
nccl-tests does. After the barrier the stream is idle, so the start event completes
when enqueued, *before* the host launched the op: the sample includes the (first) op's
launch overhead (gone only in ``cuda_graph`` mode), the device's execution, and nothing
of the ``synchronize`` after the end event. A CUDA graph that captured nothing (a CPU
tensor, a Gloo group) is an error, not a measurement.

A sample is the *maximum over ranks* of that iteration's time (the collective
is done only when its last rank is done). Each rank also takes its *arrival*: the
time from its barrier exit to its op call (the sample's common start to the moment it
entered the op; on CUDA an event pair on the idle stream, so the same host interval).
Nothing runs there but ``before_op`` (the suite's late-arrival fault), so it costs one
clock read per sample, outside the op. The per-rank samples and arrivals are gathered
with one all_gather after the timed region, so the Measurement also knows, per
iteration, which rank entered the op last (``late_arrival_rank``: a rank that arrives
late makes every rank wait inside the op, so all ranks' times are equal and only the
arrival names it), which rank finished last (``last_done_rank``: names a rank slow
inside or after the op), and each rank's median (a straggler can be named later:
``make doctor``). Arrivals are measured from each rank's own barrier exit: the
barrier's exit skew (tens of microseconds on Gloo) is not in them.

Pipelined mode issues ``depth`` ops back to back on ``depth`` distinct buffer sets
(Gloo runs async ops concurrently on its worker threads: one shared in-place buffer
would be a data race); a CUDA graph captures ``depth`` ops on ``depth`` sets likewise.
Nothing is written between timed samples (a copy there costs the next op its caches,
docs/experiments.md): ``reset`` (for ops that consume their inputs in place) runs once
after the last, then one untimed sample, so the buffers hold one op's result to check.
Nor is the journal's work inside a host-clock sample, nor between two samples but one store: it records a block
of samples' ops before the block and checks them after it (suite/harness/journal/quiet.py), so a sample holds the
same work as a bare loop's plus one clock read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from suite import metrics
from suite.measurement import Measurement
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.common.backends import record_of
from suite.case import OpFn, wait_all
from suite.harness import cuda_graph
from suite.harness.budget import BUDGET_MIN_SAMPLES, WARMUP_MIN, budget_count, warmup_count
from suite.harness.rank_samples import (
    RankSamples,
    broadcast_flag,
    broadcast_int,
    gather_ranks,
    max_over_ranks,
    per_rank_fields,
)
from suite.harness.phases import Phases
from suite.harness.journal import quiet as journal_quiet


def barrier(ctx: DistContext, async_op: bool = False):
    """``dist.barrier`` on the context's group (its Work when ``async_op``); on NCCL it names our GPU."""
    return dist.barrier(async_op=async_op, **barrier_kw(ctx))


def barrier_kw(ctx: DistContext) -> dict:
    """``dist.barrier``'s arguments on the context's group, found once per round rather than once per sample (a
    group the registry does not know, e.g. the null backend's, costs a record built anew: microseconds)."""
    kw = {"device_ids": [ctx.device.index]} if record_of(ctx.backend).one_gpu_per_rank else {}
    return {"group": ctx.group, **kw}


def _issue(ops: Sequence[OpFn], depth: int, async_op: bool) -> list:
    return [ops[i % len(ops)](async_op) for i in range(depth)]


def _run_samples(
    ctx: DistContext,
    ops: Sequence[OpFn],
    n: int,
    mode: str,
    depth: int,
    graph=None,
    before_sample: Callable[[], None] | None = None,
    before_op: Callable[[], None] | None = None,
    mark: Callable[[float, float], None] | None = None,
    steps: list | None = None,
) -> tuple[list[float], list[float]]:
    """(samples, arrivals): per sample, this rank's time from its barrier exit to the op(s) done / depth,
    and from its barrier exit to its (first) op call. ``mark(start, end)``: each host-clock sample's
    interval, after it was taken (the run's timeline, suite/harness/journal/timeline.py). ``steps``: the ops of one
    sample as the journal saw them in the warm-up (suite/harness/journal/quiet.py): then the journal records
    a block of samples' ops before the block and checks them after it, and none of its work is inside a sample."""
    if ctx.device.type == "cuda":
        return _run_samples_cuda(ctx, ops, n, mode, depth, graph, before_sample, before_op)
    # CPU: host clock (unchanged by the CUDA paths above and below); nothing to sync on the host's device.
    out, arrived = [], []
    clock, blocking, op, kw = time.perf_counter, mode == "blocking", ops[0], barrier_kw(ctx)
    j = journal_quiet.current() if steps else None
    quiet = journal_quiet.Quiet(j, ctx.group, steps) if j is not None else None
    try:
        for s in range(n):
            if before_sample is not None:
                before_sample()
            on, t0 = quiet is not None and quiet.on, None
            if on:
                quiet.begin(n - s)
            dist.barrier(**kw)  # looked up each time: the journal's wrappers come back when a sample breaks its pattern
            t0 = clock()
            if before_op is not None:
                before_op()
            t1 = clock()
            work = op(False) if blocking else _issue(ops, depth, True)
            if work is not None:
                wait_all(work)
            t2 = clock()
            out.append((t2 - t0) / depth)
            arrived.append(t1 - t0)
            if mark is not None:
                mark(t0, t2)
            if on:
                quiet.done(t0, t2)
    except BaseException:
        if quiet is not None and quiet.pending:  # the journal says which of the sample's ops failed
            quiet.fail(t0)
        raise
    finally:
        if quiet is not None:
            quiet.end()
    return out, arrived


def _run_samples_cuda(
    ctx: DistContext,
    ops: Sequence[OpFn],
    n: int,
    mode: str,
    depth: int,
    graph,
    before_sample: Callable[[], None] | None = None,
    before_op: Callable[[], None] | None = None,
) -> tuple[list[float], list[float]]:
    """Same samples (and arrivals) as the host path, timed by CUDA events on the current stream.

    With async_op=False (and after ``wait()`` of an async Work) NCCL makes the
    current stream wait for the collective's stream, so an event recorded after
    the op completes only when the collective has; the start event, recorded
    after the barrier on an idle stream, completes at once, before the host has
    launched the op, so the sample includes the launch overhead. For
    Gloo on CUDA ``wait()`` blocks the host until the op is done, so the events
    bracket the same interval as the host clock would. One event pair per
    sample; the device is synced after each sample (as on the host path), and
    the elapsed times are read after the loop. A third event, recorded just before
    the op is issued, gives the arrival: the stream is still idle there, so it
    completes when the host reaches it (after ``before_op``).
    """
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    calls = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    kw = barrier_kw(ctx)
    for i in range(n):
        if before_sample is not None:  # eager, before the start event
            before_sample()
        dist.barrier(**kw)
        starts[i].record()
        if before_op is not None:
            before_op()
        calls[i].record()
        if graph is not None:
            graph.replay()
        elif mode == "blocking":
            wait_all(ops[0](False))
        else:
            wait_all(_issue(ops, depth, True))
        ends[i].record()
        ctx.sync_device()
    # elapsed_time is in milliseconds
    return (
        [s.elapsed_time(e) / 1e3 / depth for s, e in zip(starts, ends)],
        [s.elapsed_time(c) / 1e3 for s, c in zip(starts, calls)],
    )


def _untimed(ctx: DistContext, ops: Sequence[OpFn], mode: str, depth: int, graph=None) -> None:
    """One sample's ops, untimed, as the timed samples issue them (one op per buffer set), then the device synced."""
    if graph is not None:
        graph.replay()
    elif mode == "pipelined":
        wait_all(_issue(ops, depth, True))
    else:
        for o in ops:
            wait_all(o(False))
    ctx.sync_device()


def _warm_up(
    ctx: DistContext, ops: list[OpFn], mode: str, depth: int, n: int, budget_s: float, watch_last: bool = True
) -> tuple[int, list | None]:
    """Untimed samples, one op per buffer set as the timed samples issue them: ``n``, or under a budget
    ``warmup_count`` of them (rank 0 decides, every rank runs that many). Returns how many ran, and the ops of
    the last as the journal saw them when they make a sample's pattern (suite/harness/journal/quiet.py; else
    None)."""
    j = journal_quiet.current() if watch_last and ctx.device.type != "cuda" else None
    watch = journal_quiet.Watch(j) if j is not None else None

    def once(last: bool = False) -> float:
        t = time.perf_counter()
        if last and watch is not None:
            with watch:
                _untimed(ctx, ops, mode, depth)
        else:
            _untimed(ctx, ops, mode, depth)
        return time.perf_counter() - t

    head = min(n, WARMUP_MIN) if budget_s > 0 else n
    first = [once(i == head - 1 and not (budget_s > 0 and n > WARMUP_MIN)) for i in range(head)]
    if budget_s > 0 and n > WARMUP_MIN:
        n = broadcast_int(ctx, warmup_count(first, n, budget_s) if ctx.rank == 0 else 0)
        for i in range(n - WARMUP_MIN):
            once(i == n - WARMUP_MIN - 1)
    return n, (watch.steps if watch is not None else None)


def measure(
    ctx: DistContext,
    cfg: BenchConfig,
    op: OpFn | Sequence[OpFn],
    *,
    mode: str | None = None,
    iters: int | None = None,
    warmup_iters: int | None = None,
    reset: Callable[[], None] | None = None,
    before_sample: Callable[[], None] | None = None,
    before_op: Callable[[], None] | None = None,
    keep_rank_samples: bool = False,
    started_at: float | None = None,
    rank_fields_of: Sequence[int] | None = None,
    phases: Phases | None = None,
    journal_per_sample: bool = True,
) -> Measurement:
    """Warm up, time, and reduce across ranks. The only timing loop of the suite.

    ``op`` is one OpFn, or one per in-flight op (pipelined mode issues ``pipeline_depth`` ops, cycling over them).
    ``mode``/``iters``/``warmup_iters`` override the run's config for cases that need a fixed mode (e.g. a
    barrier-per-step comparison). ``reset`` runs once after the timed samples, then one untimed sample.
    ``before_sample`` runs before each sample's barrier, outside it; it must not write the op's buffers. ``before_op``
    runs after each sample's barrier, before the op call: inside the sample and in this rank's arrival (what keeps
    a rank from reaching the op; the suite's ``SUITE_INJECT_DELAY=...@before``).
    ``rank_fields_of``: the positions whose own times the per-rank fields cover (the ranks that take part in a
    pair pattern); the samples are the maximum over every rank either way. ``phases``: where the seconds of
    warm-up, timed samples and the cross-rank reduction are added. ``journal_per_sample``: the journal records the
    timed ops per block of samples, outside them (suite/harness/journal/quiet.py); False: per op, inside it.
    Precision mode (``cfg.precision_pct`` > 0): ``_until_precise``; ``started_at`` (``time.monotonic()``, default:
    the call, so warm-up counts) is when its time cap starts.
    """
    start = time.monotonic() if started_at is None else started_at  # precision mode's cap covers the whole case
    ops, mode = list(op) if isinstance(op, (list, tuple)) else [op], mode or cfg.timing_mode
    n, warm = cfg.iters if iters is None else iters, cfg.warmup_iters if warmup_iters is None else warmup_iters
    depth = cfg.pipeline_depth if mode in ("pipelined", "cuda_graph") else 1

    phase = Phases() if phases is None else phases
    mark = phase.timeline.sample if phase.timeline is not None else None  # each sample a span of the timeline
    # The budget: an explicit count (``iters``) or precision mode turns it off; an explicit warm-up is run whole.
    budget = cfg.budget_s if iters is None and cfg.precision_pct == 0 else 0.0
    with phase("warmup"):  # and the ops of its last sample, as the journal saw them (the timed samples' pattern)
        warmed, steps = _warm_up(ctx, ops, mode, depth, warm, budget * (warmup_iters is None), journal_per_sample)
        graph, kernels = _capture(ctx, ops, depth) if mode == "cuda_graph" else (None, None)

    def round_(count: int = n) -> RankSamples:
        with phase("timed"):
            got = _run_samples(ctx, ops, count, mode, depth, graph, before_sample, before_op, mark, steps)
        with phase("gather"):
            return gather_ranks(ctx, got)

    got = round_(min(n, BUDGET_MIN_SAMPLES) if budget > 0 else n)
    if budget > 0 and n > BUDGET_MIN_SAMPLES:
        with phase("gather"):  # rank 0 decides, every rank takes that many (or the collectives hang)
            take = broadcast_int(ctx, budget_count(max_over_ranks(got), n, budget) if ctx.rank == 0 else 0)
        if take > BUDGET_MIN_SAMPLES:
            got = got.merge(round_(take - BUDGET_MIN_SAMPLES))
    reached = ci_pct = None
    if cfg.precision_pct > 0:
        got, reached, ci_pct = _until_precise(ctx, cfg, got, round_, start, phase)
    if reset is not None:  # outside every sample: the buffers then hold exactly one op's result
        with phase("check_run"):
            reset()
            _untimed(ctx, ops, mode, depth, graph)
    return Measurement(
        samples_s=max_over_ranks(got),
        timing_mode=mode,
        ops_per_sample=depth,
        warmup_iters=warmed,
        warmup_requested=warm,
        precision_reached=reached,
        precision_ci_pct=ci_pct,
        timer="cuda_event" if ctx.device.type == "cuda" else "host",
        **per_rank_fields(ctx, got, rank_fields_of, keep_rank_samples),
        buffer_sets=min(len(ops), depth),
        graph_kernel_nodes=kernels,
        budget_s=budget,
        iters_requested=n,
        stopped_by_budget=budget > 0 and len(got.per_rank[0]) < n,
    )


def _capture(ctx: DistContext, ops: Sequence[OpFn], depth: int) -> tuple:
    """cuda_graph mode: ``depth`` ops captured in one CUDA graph and replayed once, which uploads it, to keep
    that out of the samples; (the graph, its kernel nodes)."""
    graph, kernels = cuda_graph.capture(ctx, lambda: wait_all(_issue(ops, depth, False)))
    graph.replay()
    ctx.sync_device()
    return graph, kernels


def _until_precise(ctx: DistContext, cfg: BenchConfig, got, round_, start: float, phase) -> tuple:
    """Precision mode: more rounds (``round_()``) until the median's CI at look j's level is within
    ``cfg.precision_pct`` or ``cfg.max_time_s`` has passed since ``start``; (the samples, whether it was reached,
    the CI's half-width at the last look, %). One round always runs, so a case whose first round alone exceeds
    the cap stops after it. The width is re-tested after every round (optional stopping), so the CI of look j
    is taken at the level ``metrics.sequential_confidence(j)``, whose misses sum to at most 5% over all
    looks: the interval at which it stops covers the median with >= 95%. Rank 0 decides (its clock alone bounds
    the time) and tells everyone, so every rank runs as many rounds."""
    look, reached = 0, None
    while True:
        done = False
        look += 1
        if ctx.rank == 0:
            level = metrics.sequential_confidence(look)
            reached = metrics.median_ci_halfwidth_pct(max_over_ranks(got), level) <= cfg.precision_pct
            done = reached or (time.monotonic() - start) >= cfg.max_time_s
        with phase("gather"):
            stop = broadcast_flag(ctx, done)
        if stop:
            break
        got = got.merge(round_())
    with phase("gather"):
        reached = broadcast_flag(ctx, bool(reached))
    # every rank holds the same cross-rank samples and the same look: the same width, without a message
    ci_pct = metrics.median_ci_halfwidth_pct(max_over_ranks(got), metrics.sequential_confidence(look))
    return got, reached, ci_pct
