"""Point-to-point patterns: builders and declarations of the p2p experiment (experiments/p2p.py), and the
link probes the doctor (experiments/doctor.py) reuses. Latency, bandwidth, the patterns people build with
send/recv, and their pitfalls.

What is measured (one ``PATTERNS`` entry each; every case checks the exact payload
on every receiving rank, outside the timed region and in the timed buffers, and
counts wrong elements across ranks):

- ``pingpong``: rank 0 <-> each other rank over the size sweep, timed as OSU
  ``osu_latency`` does: one sample is K back-to-back round trips a->b->a (blocking
  ``send``/``recv``) with no barrier between them, the harness's barrier only before
  the sample; the recorded time is **one-way latency = sample / (2K)**. K is found
  per case before it is timed (``suite.timing.autorange``: a sample lasts at least
  ``PINGPONG_MIN_SAMPLE_S``, K >= ``PINGPONG_MIN_ROUND_TRIPS``), agreed by all ranks,
  and recorded (``round_trips_per_sample``). With one round trip per sample the
  barrier's exit skew would be part of every round trip.
- ``pair_matrix``: the same ping-pong for every ordered pair (a, b) at the sweep's
  smallest and largest size: the way to find a slow link. ``cross_node`` marks
  pairs on different hosts.
- ``window``: streaming bandwidth, OSU ``osu_bw``/``osu_bibw`` style: a window of
  ``isend``/``irecv`` (uni: rank 0 -> last rank, then a small ack; bi: both ways).
  Time is per message of one direction (iteration / window; bi: both directions at
  once), so ``algbw`` is the bandwidth of one direction, as in every p2p record; the
  bidirectional records add ``aggregate_algbw_gbps`` (both directions together, what
  ``osu_bibw`` prints).
- ``ring``: send to next, receive from previous (nccl-tests ``sendrecv_perf``),
  with blocking ``send``/``recv`` in parity order, with ``isend``/``irecv``, and
  with ``batch_isend_irecv``.
- ``exchange`` (deadlock demonstration): an isolated pair of child processes
  (suite/ops/p2p/deadlock.py) calls blocking ``send`` first on both sides for ascending
  sizes; the first size that makes no progress within a few seconds is reported
  as where the backend blocks, and the pair is killed. The correct orderings
  (parity, ``isend``/``irecv``, ``batch_isend_irecv``) complete in the same pair
  and are timed in the suite's own group at that size.
- (The pipeline of micro-batches through stages is the model_parallel experiment's: its stages
  compute, and its bubble is compared with the model of the schedule that ran.)
- ``producer``: rank 0 feeds the others: ``isend`` to each vs ``broadcast`` (same
  data for all) and vs ``scatter`` (a distinct chunk each). Sizes and bus factors are
  the collectives experiment's (see ``_bytes``), so these records compare with it.
- ``control``: a 4-byte signal from rank 0 to everyone, a ready/go handshake built
  from p2p (what a barrier does), and ``barrier`` itself.
- ``barrier_cost``: the same loop of ring steps with and without a ``barrier`` after
  every step; time is per step.
- ``batching``: K small messages rank 0 -> 1 sent one by one, with ``isend``, with
  ``batch_isend_irecv``, and packed into one coalesced buffer (pack and unpack
  included); time is per K messages.

Each pattern is declared as cases (suite/case.py): a builder returns the buffers of
one rank and a ``call`` performing one whole pattern iteration, returning when it
is complete, so the timing mode is always ``blocking`` (the pipelining, when there
is any, is inside the pattern). The divisor applied to the samples and what one
iteration is are recorded in ``time_divisor``, ``iteration`` and
``time_normalisation``. One bandwidth convention: ``algbw`` and ``busbw`` count the
bytes of **one direction** (a message, or what one rank sends to its ring neighbour;
patterns that move data both ways at once, window bidirectional, ring and exchange, do
not add the directions up; an aggregate has its own named field). ``busbw`` uses the
send/recv factor 1 (nccl-tests ``sendrecv.cu``), except the producer pattern (the
broadcast and scatter factors).
The constants of each pattern (window, micro-batch and message counts, probe bounds)
are recorded with its cases. The harness (suite/runner.py) does the rest.

A new pattern is a builder, a declaration and a ``PATTERNS`` entry, in this file.

This module imports neither pytest nor the harness (like suite/ops/collectives.py for the collectives).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from suite import metrics, verify
from suite.ops import algorithms
from suite.ops.p2p import deadlock
from suite.case import Buffers, Bytes, Case, CaseFailed, Session, wait_all
from suite.config import BenchConfig
from suite.dist import DistContext
from suite.ops.collectives import BARRIER_UNCHECKED, elsize
from suite.timing import autorange, barrier

EXPERIMENT = "p2p"

WINDOW = 64
"""Messages in flight per window: OSU ``osu_bw``/``osu_bibw``'s default window size (recorded as
``window_default``; the case's own ``window`` may be smaller, see WINDOW_MAX_BYTES)."""
WINDOW_MAX_BYTES = 256 << 20
"""The window shrinks so that window x message size stays below this (memory bound; recorded as
``window_max_bytes``)."""
PINGPONG_MIN_SAMPLE_S = 1e-3
"""A ping-pong sample lasts at least this long: K back-to-back round trips, K found by
``suite.timing.autorange`` before the case (recorded as ``min_sample_us``)."""
PINGPONG_MIN_ROUND_TRIPS = 10
"""K is at least this, whatever the message size, so what precedes a sample (the barrier, and the
lag of the last rank to leave it) is at most 1/10 of a sample's round trips (OSU runs 1000+)."""
PINGPONG_MAX_ROUND_TRIPS = 10_000
"""K is at most this (OSU ``osu_latency``'s iteration count for small messages)."""
BARRIER_STEPS = 8
"""Ring steps per iteration in the barrier-cost loop."""
BATCH_COUNTS = (8, 64)
"""K, the number of small messages in the batching comparison."""
SIGNAL_DTYPE = torch.int32
"""Control messages are one int32 element (4 bytes)."""

RING_VARIANTS = algorithms.ORDERINGS
EXCHANGE_VARIANTS = algorithms.ORDERINGS
PRODUCER_VARIANTS = ("isend_each_same", "broadcast", "isend_each_distinct", "scatter")
CONTROL_VARIANTS = ("signal", "ready_go", "barrier")
BATCHING_VARIANTS = ("send_each", "isend_each", "batch_isend_irecv", "coalesced")

PROBE = deadlock.PROBE
"""Bounds of the deadlock demonstration (suite/ops/p2p/deadlock.py)."""

OP_OF = {"producer": {"broadcast": "broadcast", "scatter": "scatter"}, "control": {"barrier": "barrier"}}
"""Record ``op``: the collective's name where one is measured, else ``send_recv``."""


@dataclass(frozen=True, kw_only=True)
class Spec:
    """What names one p2p case: a pattern, its variant, the ranks involved and the message size."""

    pattern: str
    variant: str
    size_bytes: int
    """Bytes of one message (producer: the whole buffer, as collectives';
    batching: one small message; exchange: 0 = decided by the deadlock probe)."""
    dtype: str
    src: int = -1
    dst: int = -1
    window: int = 0
    k: int = 0
    steps: int = 0
    round_trips: int = 1
    """Ping-pong: round trips per sample (K; found at run time, not part of the name)."""

    @property
    def dt(self) -> torch.dtype:
        return verify.DTYPE_OF[self.dtype]

    @property
    def count(self) -> int:
        return self.size_bytes // elsize(self.dtype)


def label_of(s: Spec) -> str:
    parts = [s.pattern, s.variant]
    if s.src >= 0 and s.dst >= 0:
        parts.append(f"{s.src}to{s.dst}")
    if s.k:
        parts.append(f"K{s.k}")
    if s.size_bytes:
        parts.append(f"{s.size_bytes}B")
    return "-".join(parts)


# --- helpers ------------------------------------------------------------------------------------


def _pat(ctx: DistContext, rank: int, count: int, dtype: torch.dtype, offset: int = 0) -> torch.Tensor:
    # Messages only move: any exact value, distinct per (sender, global element index), so a
    # dropped, duplicated or reordered message (message j sits at offset j * count) is seen.
    return verify.pattern(rank, count, dtype, redop="none", world_size=ctx.world_size, offset=offset, device=ctx.device)


def _blank(ctx: DistContext, count: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.full((count,), -1, dtype=dtype, device=ctx.device)


def _cross(ctx: DistContext, a: int, b: int) -> bool:
    return ctx.node_of(a) != ctx.node_of(b)


def _nodes(ctx: DistContext) -> list[int]:
    return [ctx.node_of(r) for r in range(ctx.world_size)]


def _buffers(ctx: DistContext, run: Callable[[], None], check: Callable[[], int], received: list, **fields) -> Buffers:
    """One pattern iteration as the harness calls it (the mode is fixed: blocking)."""
    return Buffers(
        call=lambda async_op: run(), check=check, outputs=lambda: received, fields={"nodes": _nodes(ctx), **fields}
    )


# --- builders: inputs, one iteration, the exact expected payload --------------------------------


def _pingpong(ctx: DistContext, s: Spec) -> Buffers:
    dt, a, b, count = s.dt, s.src, s.dst, s.count
    me, g = ctx.rank, ctx.group
    involved = me in (a, b)
    peer = b if me == a else a
    sbuf = _pat(ctx, me, count, dt) if involved else None
    rbuf = _blank(ctx, count, dt) if involved else None

    def run():
        for _ in range(s.round_trips):  # back to back: no barrier between round trips (OSU)
            if me == a:
                dist.send(sbuf, b, group=g)
                dist.recv(rbuf, b, group=g)
            elif me == b:
                dist.recv(rbuf, a, group=g)
                dist.send(sbuf, a, group=g)

    return _buffers(
        ctx,
        run,
        lambda: verify.count_wrong(rbuf, _pat(ctx, peer, count, dt)) if involved else 0,
        [rbuf] if involved else [],
        cross_node=_cross(ctx, a, b),
    )


def _window(ctx: DistContext, s: Spec) -> Buffers:
    dt, a, b, w, count = s.dt, s.src, s.dst, s.window, s.count
    me, g = ctx.rank, ctx.group
    bi = s.variant == "bidirectional"
    involved = me in (a, b)
    peer = b if me == a else a
    sends = [_pat(ctx, me, count, dt, offset=j * count) for j in range(w)] if involved and (bi or me == a) else []
    recvs = [_blank(ctx, count, dt) for _ in range(w)] if involved and (bi or me == b) else []
    ack_out = _pat(ctx, me, 1, dt)
    ack_in = _blank(ctx, 1, dt)

    def run():
        if not involved:
            return
        works = [dist.irecv(r, peer, group=g) for r in recvs]
        works += [dist.isend(t, peer, group=g) for t in sends]
        wait_all(works)
        if not bi:  # OSU osu_bw: the receiver acknowledges the whole window
            if me == a:
                dist.recv(ack_in, b, group=g)
            else:
                dist.send(ack_out, a, group=g)

    def wrong():
        n = sum(verify.count_wrong(r, _pat(ctx, peer, count, dt, offset=j * count)) for j, r in enumerate(recvs))
        if involved and not bi and me == a:
            n += verify.count_wrong(ack_in, _pat(ctx, b, 1, dt))
        return n

    buf = _buffers(
        ctx, run, wrong, recvs + ([ack_in] if involved and not bi and me == a else []), cross_node=_cross(ctx, a, b)
    )
    if bi:  # algbw is one direction's; the aggregate is named (OSU osu_bibw prints it)
        buf.derive = lambda m, around, session: {
            "aggregate_algbw_gbps": metrics.algbw_gbps(2 * s.size_bytes, m.median_s)
        }
    return buf


def _ring_step(ctx: DistContext, variant: str, sbuf: torch.Tensor, rbuf: torch.Tensor) -> None:
    """Send to rank+1 while receiving from rank-1, with ``variant`` (one of algorithms.ORDERINGS)."""
    me, n = ctx.rank, ctx.world_size
    algorithms.exchange(sbuf, rbuf, (me + 1) % n, (me - 1) % n, ctx.group, variant)


def _ring(ctx: DistContext, s: Spec) -> Buffers:
    dt, count = s.dt, s.count
    n, me = ctx.world_size, ctx.rank
    sbuf, rbuf = _pat(ctx, me, count, dt), _blank(ctx, count, dt)
    return _buffers(
        ctx,
        lambda: _ring_step(ctx, s.variant, sbuf, rbuf),
        lambda: verify.count_wrong(rbuf, _pat(ctx, (me - 1) % n, count, dt)),
        [rbuf],
        cross_node_links=sum(_cross(ctx, r, (r + 1) % n) for r in range(n)),
    )


def _exchange(ctx: DistContext, s: Spec) -> Buffers:
    """Ranks 0 and 1 swap buffers with one of the orderings that cannot deadlock."""
    dt = s.dt
    count = max(1, s.count)
    me, g = ctx.rank, ctx.group
    involved = me in (0, 1)
    peer = 1 - me if involved else -1
    sbuf = _pat(ctx, me, count, dt) if involved else None
    rbuf = _blank(ctx, count, dt) if involved else None

    def run():
        if involved:
            algorithms.exchange(sbuf, rbuf, peer, peer, g, s.variant)

    return _buffers(
        ctx,
        run,
        lambda: verify.count_wrong(rbuf, _pat(ctx, peer, count, dt)) if involved else 0,
        [rbuf] if involved else [],
        cross_node=_cross(ctx, 0, 1),
    )


def _distinct(variant: str) -> bool:
    """Whether a producer variant hands each rank its own chunk (scatter-like) or the same buffer."""
    return variant in ("isend_each_distinct", "scatter")


def _producer(ctx: DistContext, s: Spec) -> Buffers:
    n, me, g = ctx.world_size, ctx.rank, ctx.group
    distinct = _distinct(s.variant)
    dt, count = s.dt, s.count // n if distinct else s.count  # s.count: the whole buffer

    def expected(r: int) -> torch.Tensor:
        return _pat(ctx, 0, count, dt, offset=r * count if distinct else 0)

    if s.variant == "scatter":
        chunks = [expected(r) for r in range(n)] if me == 0 else None
        out = _blank(ctx, count, dt)
        return _buffers(
            ctx,
            lambda: dist.scatter(out, scatter_list=chunks, src=0, group=g),
            lambda: verify.count_wrong(out, expected(me)),
            [out],
        )
    if s.variant == "broadcast":
        buf = expected(0) if me == 0 else _blank(ctx, count, dt)
        return _buffers(
            ctx,
            lambda: dist.broadcast(buf, src=0, group=g),
            lambda: verify.count_wrong(buf, expected(0)) if me else 0,
            [buf] if me else [],
        )
    # isend to each consumer: the p2p fan-out the source describes for asymmetric work
    sends: dict = {}
    if me == 0:
        one = None if distinct else expected(0)
        sends = {r: expected(r) if distinct else one for r in range(1, n)}
    rbuf = _blank(ctx, count, dt) if me else None

    def run():
        if me == 0:
            wait_all([dist.isend(t, r, group=g) for r, t in sends.items()])
        else:
            dist.recv(rbuf, 0, group=g)

    return _buffers(ctx, run, lambda: verify.count_wrong(rbuf, expected(me)) if me else 0, [rbuf] if me else [])


def _control(ctx: DistContext, s: Spec) -> Buffers:
    n, me, g = ctx.world_size, ctx.rank, ctx.group
    if s.variant == "barrier":
        return _buffers(ctx, lambda: barrier(ctx), lambda: 0, [])
    go = _pat(ctx, 0, 1, SIGNAL_DTYPE)
    ready = _pat(ctx, me, 1, SIGNAL_DTYPE)
    got = _blank(ctx, 1, SIGNAL_DTYPE)
    readies = {r: _blank(ctx, 1, SIGNAL_DTYPE) for r in range(1, n)} if me == 0 and s.variant == "ready_go" else {}

    def run():
        if me == 0:
            if s.variant == "ready_go":
                wait_all([dist.irecv(t, r, group=g) for r, t in readies.items()])
            wait_all([dist.isend(go, r, group=g) for r in range(1, n)])
        else:
            if s.variant == "ready_go":
                dist.send(ready, 0, group=g)
            dist.recv(got, 0, group=g)

    def wrong():
        if me:
            return verify.count_wrong(got, go)
        return sum(verify.count_wrong(t, _pat(ctx, r, 1, SIGNAL_DTYPE)) for r, t in readies.items())

    return _buffers(ctx, run, wrong, [got] if me else list(readies.values()))


def _barrier_cost(ctx: DistContext, s: Spec) -> Buffers:
    dt, k, count = s.dt, s.steps, s.count
    n, me = ctx.world_size, ctx.rank
    sbufs = [_pat(ctx, me, count, dt, offset=i * count) for i in range(k)]
    rbufs = [_blank(ctx, count, dt) for _ in range(k)]
    with_barrier = s.variant == "barrier_each_step"

    def run():
        for i in range(k):
            _ring_step(ctx, "isend_irecv", sbufs[i], rbufs[i])
            if with_barrier:
                barrier(ctx)

    return _buffers(
        ctx,
        run,
        lambda: sum(
            verify.count_wrong(r, _pat(ctx, (me - 1) % n, count, dt, offset=i * count)) for i, r in enumerate(rbufs)
        ),
        rbufs,
    )


def _batching(ctx: DistContext, s: Spec) -> Buffers:
    dt, k, a, b, c = s.dt, s.k, s.src, s.dst, s.count
    me, g = ctx.rank, ctx.group
    sends = [_pat(ctx, a, c, dt, offset=j * c) for j in range(k)] if me == a else []
    recvs = [_blank(ctx, c, dt) for _ in range(k)] if me == b else []
    flat = torch.empty(k * c, dtype=dt, device=ctx.device) if me in (a, b) else None
    v = s.variant

    def run():
        if me not in (a, b):
            return
        if v == "send_each":
            for t in sends:
                dist.send(t, b, group=g)
            for r in recvs:
                dist.recv(r, a, group=g)
        elif v == "isend_each":
            wait_all([dist.isend(t, b, group=g) for t in sends] + [dist.irecv(r, a, group=g) for r in recvs])
        elif v == "batch_isend_irecv":
            wait_all(
                dist.batch_isend_irecv(
                    [dist.P2POp(dist.isend, t, b, g) for t in sends] + [dist.P2POp(dist.irecv, r, a, g) for r in recvs]
                )
            )
        elif me == a:  # coalesced: pack, one send
            torch.cat(sends, out=flat)
            dist.send(flat, b, group=g)
        else:  # one recv, unpack
            dist.recv(flat, a, group=g)
            for j, r in enumerate(recvs):
                r.copy_(flat[j * c : (j + 1) * c])

    return _buffers(
        ctx,
        run,
        lambda: sum(verify.count_wrong(r, _pat(ctx, a, c, dt, offset=j * c)) for j, r in enumerate(recvs)),
        recvs,
        cross_node=_cross(ctx, a, b),
    )


# --- the deadlock probe, once per session ---------------------------------------------------------


def _probe_backend(ctx: DistContext) -> tuple[str, str]:
    # NCCL needs a GPU per process of the pair; otherwise show it with Gloo on CPU.
    if ctx.backend == "nccl" and torch.cuda.device_count() >= 2:
        return "nccl", "cuda"
    return "gloo", "cpu"


def _deadlock_result(ctx: DistContext) -> dict:
    """Run the probe on rank 0; every rank gets its result (a dict of ProbeResult's fields)."""
    obj = [None]
    if ctx.rank == 0:
        backend, device = _probe_backend(ctx)
        try:
            obj[0] = dataclasses.asdict(deadlock.run_deadlock_probe(backend, device))
        except Exception as e:  # the other ranks are waiting for an answer, not an exception
            obj[0] = {"error": f"{type(e).__name__}: {e}"}
    dist.broadcast_object_list(obj, src=0, group=ctx.group)
    return obj[0]


def _resolve_exchange(s: Spec):
    """The exchange case at the size where both-send-first blocked, with the probe's findings."""

    def resolve(case: Case, ctx: DistContext, cfg: BenchConfig, session: Session) -> Case:
        probe = session.once("deadlock", lambda: _deadlock_result(ctx))
        if probe["error"]:
            raise CaseFailed(f"deadlock demonstration failed: {probe['error']}")
        el = elsize(s.dtype)
        size = probe["blocked_from_bytes"] or probe["correct_orderings_bytes"]
        at = dataclasses.replace(s, size_bytes=max(el, size // el * el))
        # The pair's own wrong elements count once, on rank 0, in the check run (the first build).
        pending = [probe["n_wrong"] if ctx.rank == 0 else 0]

        def build(c: DistContext) -> Buffers:
            b = _exchange(c, at)
            extra = pending.pop() if pending else 0
            if extra:
                inner = b.check
                b.check = lambda: inner() + extra
            return b

        return dataclasses.replace(
            case,
            label=label_of(at),
            bytes=_bytes(at),
            build=build,
            fields={**case.fields, **{"deadlock_" + k: v for k, v in probe.items()}},
            provenance={**case.provenance, **deadlock.PROVENANCE},
        )

    return resolve


def _resolve_pingpong(s: Spec):
    """The ping-pong case with K round trips per sample, K found now on this group (every rank)."""

    def resolve(case: Case, ctx: DistContext, cfg: BenchConfig, session: Session) -> Case:
        k, trial_s = autorange(
            ctx,
            _pingpong(ctx, s).call,
            min_sample_s=PINGPONG_MIN_SAMPLE_S,
            min_repeats=PINGPONG_MIN_ROUND_TRIPS,
            max_repeats=PINGPONG_MAX_ROUND_TRIPS,
        )
        at = dataclasses.replace(s, round_trips=k)
        return dataclasses.replace(
            case,
            build=lambda c: _pingpong(c, at),
            divisor=2 * k,
            normalisation=f"sample / (2K), K = {k}: one-way latency (OSU osu_latency)",
            fields={
                **case.fields,
                "round_trips_per_sample": k,
                "calibration_sample_us": trial_s * 1e6,
                "iteration": f"{k} back-to-back round trips {s.src}->{s.dst}->{s.src}, blocking send/recv, "
                "no barrier between them",
            },
            provenance={
                **case.provenance,
                "time_us": "derived: sample / (2K); sample = K back-to-back round trips after one barrier, "
                "the maximum over ranks, median over samples (host or cuda_event clock)",
                "round_trips_per_sample": f"derived: the K of suite.timing.autorange: the first trial of K "
                f"round trips lasting >= min_sample_us on the slowest rank, "
                f"K in [{PINGPONG_MIN_ROUND_TRIPS}, {PINGPONG_MAX_ROUND_TRIPS}]",
                "calibration_sample_us": "measured: that trial's time, maximum over ranks (host clock)",
            },
        )

    return resolve


# --- declarations: one entry per pattern ------------------------------------------------------------


@dataclass(frozen=True)
class _Sweep:
    """The run's message sizes for the first dtype (identical on all ranks)."""

    dtype: str
    sizes: list[int]
    ends: list[int]
    """Smallest and largest size."""


def _skip(s: Spec):
    def skip(ctx: DistContext, cfg: BenchConfig) -> str | None:
        n = ctx.world_size
        if n < 2:
            return "point-to-point needs at least 2 ranks"
        if ctx.backend == "gloo" and ctx.device.type != "cpu":
            # ProcessGroupGloo::send/recv hand the tensor's raw pointer to the TCP transport
            # without a device check; the same decision on every rank (it comes from the config).
            return "Gloo point-to-point takes CPU tensors only; run p2p with DEVICE=cpu or BACKEND=nccl"
        if max(s.src, s.dst) >= n:
            return f"ranks {s.src}/{s.dst} not in a world of {n}"
        if s.pattern == "exchange" and cfg.timeout_s < PROBE.total_limit_s + 10:
            return (
                f"the deadlock probe may take {PROBE.total_limit_s:.0f} s while the other ranks wait; "
                f"needs TIMEOUT_S >= {PROBE.total_limit_s + 10:.0f}"
            )
        return None

    return skip


def _bytes(s: Spec) -> Bytes:
    """The byte model: what ``size_bytes`` counts for algbw (busbw factor: send/recv, 1).

    The producer pattern is the exception, on purpose: its ``scatter`` and ``broadcast`` are the
    collectives themselves, and its isend fan-outs do what they do, so all four are recorded as the
    collectives experiment records scatter and broadcast (suite/ops/collectives.py): S = the whole buffer
    (scatter: chunk x ranks) and the OP_TABLE factor ((n-1)/n, 1). A reader who sets a producer
    record beside a collectives record of the same S then compares like with like; the bytes that
    actually reach each consumer and cross the producer's link are the fields ``consumer_bytes``
    and ``delivered_bytes``. (Naming them apart instead would leave two conventions for one op.)
    """
    el = elsize(s.dtype)
    if s.pattern == "batching":
        size, what = s.size_bytes * s.k, "K messages x message bytes"
    elif s.pattern == "control":
        if s.variant == "barrier":
            return Bytes(size_bytes=0, count=0, dtype="none", bw_op="barrier", definition="a barrier moves no data")
        el = elsize("int32")
        return Bytes(size_bytes=el, count=1, dtype="int32", bw_op="send_recv", definition="one int32 signal (4 bytes)")
    elif s.pattern == "producer":
        if _distinct(s.variant):
            return Bytes(
                size_bytes=s.size_bytes,
                count=s.count,
                dtype=s.dtype,
                bw_op="scatter",
                definition="the whole scattered buffer: chunk x ranks (nccl-tests S of scatter, as in "
                "the collectives experiment)",
            )
        return Bytes(
            size_bytes=s.size_bytes,
            count=s.count,
            dtype=s.dtype,
            bw_op="broadcast",
            definition="the buffer every consumer receives (nccl-tests S of broadcast, as in the "
            "collectives experiment)",
        )
    else:
        size, what = s.size_bytes, "bytes of one message"
    return Bytes(size_bytes=size, count=size // el, dtype=s.dtype, bw_op="send_recv", definition=what)


def _case(
    s: Spec,
    build: Callable[[DistContext, Spec], Buffers],
    iteration: str,
    *,
    divisor: int = 1,
    normalisation: str = "none: time of one iteration",
    fields: dict | None = None,
    provenance: dict | None = None,
    unchecked: str | None = None,
) -> Case:
    identity = {"pattern": s.pattern, "variant": s.variant, "src": s.src, "dst": s.dst}
    for name, v in (("window", s.window), ("k_messages", s.k), ("steps", s.steps)):
        if v:
            identity[name] = v
    case = Case(
        experiment=EXPERIMENT,
        op=OP_OF.get(s.pattern, {}).get(s.variant, "send_recv"),
        label=label_of(s),
        identity=identity,
        bytes=_bytes(s),
        build=lambda ctx: build(ctx, s),
        unchecked=unchecked,
        fields={"iteration": iteration, **(fields or {})},
        provenance=provenance or {},
        mode="blocking",
        divisor=divisor,
        normalisation=normalisation,
        skip=_skip(s),
        # the exchange's size and deadlock_* fields are found at run time
        resolve=_RESOLVE[s.pattern](s) if s.pattern in _RESOLVE else None,
    )
    return _rank_fields(case, s)


_PAIR_PATTERNS = ("pingpong", "pair_matrix", "window", "batching", "exchange")
"""Patterns in which only two ranks take part (src and dst; the exchange: 0 and 1)."""


def _rank_fields(case: Case, s: Spec) -> Case:
    """Whose own times the per-rank fields of a pair pattern report: ping-pong's initiator alone (its clock,
    as OSU osu_latency times it: the responder's time is the same round trips seen from the other end), the
    two ranks of the other pair patterns; the ranks that take no part in none (their time is ~0)."""
    if s.pattern not in _PAIR_PATTERNS:
        return case
    pair = (0, 1) if s.pattern == "exchange" else (s.src, s.dst)
    if s.pattern in ("pingpong", "pair_matrix"):
        ranks, what = pair[:1], f"the initiator's own clock (rank {pair[0]}, as OSU osu_latency times it)"
    else:
        ranks, what = pair, f"per rank that takes part (ranks {pair[0]} and {pair[1]})"
    return dataclasses.replace(
        case,
        rank_fields_of=ranks,
        provenance={
            "rank_median_us": f"measured: {what}, the median over iterations of its own time, divided as "
            "time_us is; the ranks that take no part are not in it (group_ranks: the ranks reported)",
            **case.provenance,
        },
    )


_RESOLVE = {"exchange": _resolve_exchange, "pingpong": _resolve_pingpong, "pair_matrix": _resolve_pingpong}
"""Patterns whose cases are completed at run time: the exchange's size, ping-pong's K."""


def _pingpong_cases(cfg: BenchConfig, n: int, sw: _Sweep, pattern: str = "pingpong") -> list[Case]:
    if pattern == "pingpong":
        specs = [
            Spec(pattern=pattern, variant="send_recv", size_bytes=sz, dtype=sw.dtype, src=0, dst=r)
            for r in range(1, n)
            for sz in sw.sizes
        ]
    else:
        specs = [
            Spec(pattern=pattern, variant="send_recv", size_bytes=sz, dtype=sw.dtype, src=a, dst=b)
            for sz in sw.ends
            for a in range(n)
            for b in range(n)
            if a != b
        ]
    return pingpong_cases(specs)


def pingpong_cases(specs: list[Spec]) -> list[Case]:
    """The ping-pong case of each spec (src initiates; K round trips per sample, found at run time)."""
    # iteration, divisor and normalisation are completed once K is known (_resolve_pingpong)
    return [
        _case(
            s,
            _pingpong,
            "K back-to-back round trips",
            divisor=2,
            normalisation="sample / (2K)",
            fields={
                "latency_definition": "one-way = sample / (2K), a sample = K back-to-back round trips "
                "after one barrier (OSU osu_latency)",
                "latency_formula": "sample / (2K)",
                "peer": s.dst,
                "min_sample_us": PINGPONG_MIN_SAMPLE_S * 1e6,
                "min_round_trips": PINGPONG_MIN_ROUND_TRIPS,
                "max_round_trips": PINGPONG_MAX_ROUND_TRIPS,
            },
        )
        for s in specs
    ]


def pair_latency_cases(pairs: list[tuple[int, int]], size_bytes: int, dtype: str) -> list[Case]:
    """The pair-matrix ping-pong of each (src, dst) at one size."""
    return pingpong_cases(
        [
            Spec(pattern="pair_matrix", variant="send_recv", size_bytes=size_bytes, dtype=dtype, src=a, dst=b)
            for a, b in pairs
        ]
    )


def _pair_matrix_cases(cfg: BenchConfig, n: int, sw: _Sweep) -> list[Case]:
    return _pingpong_cases(cfg, n, sw, pattern="pair_matrix")


def window_case(s: Spec) -> Case:
    """The streaming-bandwidth case of ``s`` (pattern window; its src, dst, window and variant)."""
    a, b, w = s.src, s.dst, s.window
    bi = s.variant == "bidirectional"
    dirs = 2 if bi else 1
    return _case(
        s,
        _window,
        (
            f"{w} isend + {w} irecv each way between {a} and {b}, wait all"
            if bi
            else f"{w} isend {a}->{b} (irecv on {b}), wait all, 1-element ack {b}->{a}"
        ),
        divisor=w,
        normalisation=f"iteration / window {w}: time per message of one direction"
        + (" (both directions at once); algbw = one direction, aggregate_algbw_gbps = both" if bi else ""),
        provenance={
            "aggregate_algbw_gbps": "derived: 2 x size_bytes / time_us (both directions together, OSU osu_bibw)"
        }
        if bi
        else None,
        fields={
            "peer": b,
            "directions": dirs,
            "window_default": WINDOW,
            "window_max_bytes": WINDOW_MAX_BYTES,
            "window_osu": 64,
        },
    )


def _window_cases(cfg: BenchConfig, n: int, sw: _Sweep) -> list[Case]:
    return [
        window_case(
            Spec(
                pattern="window",
                variant=variant,
                size_bytes=sz,
                dtype=sw.dtype,
                src=0,
                dst=n - 1,
                window=max(1, min(WINDOW, WINDOW_MAX_BYTES // sz)),
            )
        )
        for variant in ("unidirectional", "bidirectional")
        for sz in sw.sizes
    ]


def ring_case(variant: str, size_bytes: int, dtype: str) -> Case:
    """Send to rank+1 while receiving from rank-1, with ``variant`` (one of RING_VARIANTS)."""
    return _case(
        Spec(pattern="ring", variant=variant, size_bytes=size_bytes, dtype=dtype),
        _ring,
        "every rank sends to rank+1 and receives from rank-1",
    )


def _ring_cases(cfg: BenchConfig, n: int, sw: _Sweep) -> list[Case]:
    return [ring_case(v, sz, sw.dtype) for v in RING_VARIANTS for sz in sw.sizes]


def _exchange_cases(cfg: BenchConfig, n: int, sw: _Sweep) -> list[Case]:
    # size 0: decided at run time by the deadlock probe (resolve)
    return [
        _case(
            Spec(pattern="exchange", variant=v, size_bytes=0, dtype=sw.dtype, src=0, dst=1),
            _exchange,
            f"ranks 0 and 1 swap one message ({v})",
            fields={"peer": 1},
        )
        for v in EXCHANGE_VARIANTS
    ]


_PRODUCER_ITERATION = {
    "scatter": "scatter from rank 0 (a distinct chunk per rank, rank 0 keeps its own)",
    "broadcast": "broadcast from rank 0",
    "isend_each_same": "rank 0 isends the same buffer to each consumer, waits all; consumers recv",
    "isend_each_distinct": "rank 0 isends a distinct chunk to each consumer, waits all; consumers recv",
}


def _producer_cases(cfg: BenchConfig, n: int, sw: _Sweep) -> list[Case]:
    """Sizes are the whole buffer, as the collectives experiment's: for the distinct-chunk variants a
    multiple of n elements (each rank's chunk is size / n), sizes with no whole chunk left out."""
    el = elsize(sw.dtype)
    out, seen = [], set()
    for sz in sw.sizes:
        for v in PRODUCER_VARIANTS:
            size = sz // (el * n) * el * n if _distinct(v) else sz
            if not size or (v, size) in seen:
                continue
            seen.add((v, size))
            per = size // n if _distinct(v) else size
            out.append(
                _case(
                    Spec(pattern="producer", variant=v, size_bytes=size, dtype=sw.dtype, src=0),
                    _producer,
                    _PRODUCER_ITERATION[v],
                    fields={"consumers": n - 1, "consumer_bytes": per, "delivered_bytes": (n - 1) * per},
                    provenance={
                        "delivered_bytes": "derived: consumers x consumer_bytes (what crosses the producer's link)"
                    },
                )
            )
    return out


_CONTROL_ITERATION = {
    "signal": "rank 0 isends a 4-byte signal to every rank",
    "ready_go": "every rank sends 'ready' to rank 0, rank 0 answers 'go' to all (a barrier built from p2p)",
    "barrier": "dist.barrier",
}


def _control_cases(cfg: BenchConfig, n: int, sw: _Sweep) -> list[Case]:
    el = elsize("int32")
    return [
        _case(
            Spec(pattern="control", variant=v, size_bytes=0, dtype=sw.dtype, src=0),
            _control,
            _CONTROL_ITERATION[v],
            fields={"signal_bytes": 0 if v == "barrier" else el},
            unchecked=BARRIER_UNCHECKED if v == "barrier" else None,
        )
        for v in CONTROL_VARIANTS
    ]


def _barrier_cost_cases(cfg: BenchConfig, n: int, sw: _Sweep) -> list[Case]:
    k = BARRIER_STEPS
    return [
        _case(
            Spec(pattern="barrier_cost", variant=v, size_bytes=sz, dtype=sw.dtype, steps=k),
            _barrier_cost,
            f"{k} ring steps (isend/irecv)" + (", barrier after each" if v == "barrier_each_step" else ""),
            divisor=k,
            normalisation=f"iteration / {k}: time per step",
            fields={"barrier_each_step": v == "barrier_each_step"},
        )
        for sz in sw.ends
        for v in ("no_barrier", "barrier_each_step")
    ]


def _batching_cases(cfg: BenchConfig, n: int, sw: _Sweep) -> list[Case]:
    size = sw.sizes[0]
    return [
        _case(
            Spec(pattern="batching", variant=v, size_bytes=size, dtype=sw.dtype, src=0, dst=1, k=k),
            _batching,
            f"{k} messages of {size} B 0->1 ({v}"
            + ("; pack + unpack copies included" if v == "coalesced" else "")
            + ")",
            normalisation=f"none: time for all {k} messages; size_bytes = {k} x message bytes",
            fields={"peer": 1, "message_bytes": size, "k_counts": list(BATCH_COUNTS)},
        )
        for k in BATCH_COUNTS
        for v in BATCHING_VARIANTS
    ]


PATTERNS: dict[str, Callable[[BenchConfig, int, _Sweep], list[Case]]] = {
    "pingpong": _pingpong_cases,
    "pair_matrix": _pair_matrix_cases,
    "window": _window_cases,
    "ring": _ring_cases,
    "exchange": _exchange_cases,
    "producer": _producer_cases,
    "control": _control_cases,
    "barrier_cost": _barrier_cost_cases,
    "batching": _batching_cases,
}
"""Pattern -> its declaration: the cases of the pattern for the run's sweep and world size."""


def not_runnable(reason: str) -> Case:
    """One case that says why nothing can run (instead of pytest's "got empty parameter set")."""

    def build(ctx: DistContext) -> Buffers:
        raise CaseFailed(reason)

    return Case(
        experiment=EXPERIMENT,
        op="send_recv",
        label=EXPERIMENT,
        identity={},
        bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None),
        build=build,
        skip=lambda ctx, cfg: reason,
    )


def cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Every p2p pattern for the run's sweep and world size (identical on all ranks)."""
    dtype = cfg.dtypes[0]
    el = elsize(dtype)
    sizes = sorted({s // el * el for s in cfg.sizes() if s >= el})
    if world_size < 2:
        return [not_runnable(f"point-to-point needs at least 2 ranks (world size {world_size})")]
    if not sizes:
        return [not_runnable(f"no message size of the sweep holds one {dtype} element")]
    sw = _Sweep(dtype=dtype, sizes=sizes, ends=sorted({sizes[0], sizes[-1]}))
    return [c for declare in PATTERNS.values() for c in declare(cfg, world_size, sw)]
