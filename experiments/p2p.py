"""Point-to-point: latency, bandwidth, the patterns people build with send/recv, and their pitfalls.

What is measured (one ``PATTERNS`` entry each; every case checks the exact payload
on every receiving rank, outside the timed region, and counts wrong elements
across ranks):

- ``pingpong``: rank 0 <-> each other rank over the size sweep (OSU ``osu_latency``).
  One timed iteration is a round trip a->b->a with blocking ``send``/``recv``;
  the recorded time is **one-way latency = round trip / 2**.
- ``pair_matrix``: the same ping-pong for every ordered pair (a, b) at the sweep's
  smallest and largest size: the way to find a slow link. ``cross_node`` marks
  pairs on different hosts.
- ``window``: streaming bandwidth, OSU ``osu_bw``/``osu_bibw`` style: a window of
  ``isend``/``irecv`` (uni: rank 0 -> last rank, then a small ack; bi: both ways).
  Time is per message (iteration / (window x directions)), so ``algbw`` is the
  aggregate bandwidth.
- ``ring``: send to next, receive from previous (nccl-tests ``sendrecv_perf``),
  with blocking ``send``/``recv`` in parity order, with ``isend``/``irecv``, and
  with ``batch_isend_irecv``.
- ``exchange`` (deadlock demonstration): an isolated pair of child processes with
  their own store on a loopback port calls blocking ``send`` first on both sides
  for ascending sizes; the first size that makes no progress within a few seconds
  is reported as where the backend blocks, and the pair is killed. The correct
  orderings (parity, ``isend``/``irecv``, ``batch_isend_irecv``) complete in the
  same pair and are timed in the suite's own group at that size.
- ``pipeline``: stages rank i -> i+1 pass activation-like micro-batches (each stage
  adds 1, so the last stage's payload is exact); throughput vs micro-batch count M
  and the bubble fraction against the ideal (S-1)/(M+S-1) (see suite/tables/p2p.py).
- ``producer``: rank 0 feeds the others: ``isend`` to each vs ``broadcast`` (same
  data for all) and vs ``scatter`` (a distinct chunk each). ``size_bytes`` is what
  each consumer receives.
- ``control``: a 4-byte signal from rank 0 to everyone, a ready/go handshake built
  from p2p (what a barrier does), and ``barrier`` itself.
- ``barrier_cost``: the same loop of ring steps with and without a ``barrier`` after
  every step; time is per step.
- ``batching``: K small messages rank 0 -> 1 sent one by one, with ``isend``, with
  ``batch_isend_irecv``, and packed into one coalesced buffer (pack and unpack
  included); time is per K messages.

Every pattern is timed by ``suite.timing.measure`` with ``op_fn`` performing one
whole pattern iteration and returning when it is complete, so the mode is always
``blocking`` (the pipelining, when there is any, is inside the pattern). The
divisor applied to the samples and what one iteration is are recorded in
``time_divisor``, ``iteration`` and ``time_normalisation``. ``busbw`` uses the
send/recv factor 1 (nccl-tests ``sendrecv.cu``).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from suite import verify
from suite.config import BenchConfig
from suite.dist import DistContext
from suite.plugin import submit
from suite.results import make_record
from suite.timing import Measurement, measure

EXPERIMENT = "p2p"
ROOT = Path(__file__).resolve().parent.parent

WINDOW = 16
"""Messages in flight per window (OSU uses 64; 16 keeps memory at window x size small)."""
WINDOW_MAX_BYTES = 256 << 20
"""The window shrinks so that window x message size stays below this (memory bound)."""
MICROBATCHES = (1, 2, 4, 8)
"""Micro-batch counts M of the pipeline."""
BARRIER_STEPS = 8
"""Ring steps per iteration in the barrier-cost loop."""
BATCH_COUNTS = (8, 64)
"""K, the number of small messages in the batching comparison."""
SIGNAL_DTYPE = torch.int32
"""Control messages are one int32 element (4 bytes)."""

RING_VARIANTS = ("send_recv_parity", "isend_irecv", "batch_isend_irecv")
EXCHANGE_VARIANTS = ("send_recv_parity", "isend_irecv", "batch_isend_irecv")
PRODUCER_VARIANTS = ("isend_each_same", "broadcast", "isend_each_distinct", "scatter")
CONTROL_VARIANTS = ("signal", "ready_go", "barrier")
BATCHING_VARIANTS = ("send_each", "isend_each", "batch_isend_irecv", "coalesced")


@dataclass(frozen=True, kw_only=True)
class DeadlockProbe:
    """Bounds of the isolated both-send-first demonstration."""

    sizes: tuple[int, ...] = tuple(4 << (2 * i) for i in range(12))
    """Probe sizes, bytes, ascending: 4 B .. 16 MiB (x4)."""
    hang_bound_s: float = 3.0
    """A step that makes no progress for this long is declared hung."""
    start_limit_s: float = 30.0
    """Time allowed for the pair to start (import torch, rendezvous) on a loaded host."""
    total_limit_s: float = 45.0
    """Hard cap on the whole probe, start included."""


PROBE = DeadlockProbe()


@dataclass(frozen=True, kw_only=True)
class Case:
    """One measurement: a pattern, its variant, the ranks involved and the message size."""

    pattern: str
    variant: str
    size_bytes: int
    """Bytes of one message (pipeline: one micro-batch; producer: what each consumer gets;
    batching: one small message; exchange: 0 = decided by the deadlock probe)."""
    src: int = -1
    dst: int = -1
    window: int = 0
    microbatches: int = 0
    k: int = 0
    steps: int = 0


@dataclass
class Plan:
    """What a builder returns: one pattern iteration, and how to check what it delivered."""

    run: Callable[[], None]
    """One complete pattern iteration on this rank (returns when this rank's part is done)."""
    wrong: Callable[[], int]
    """Wrong elements received on this rank after ``run`` (0 where nothing is received)."""
    received: list[torch.Tensor]
    """This rank's receive buffers (blanked before the check; fault injection target)."""
    divisor: int = 1
    """Samples are divided by this to give the recorded time."""
    iteration: str = ""
    """What one timed iteration is."""
    normalisation: str = "none: time of one iteration"
    extra: dict = field(default_factory=dict)


# --- helpers ------------------------------------------------------------------------------------

def _dtype(cfg: BenchConfig) -> torch.dtype:
    return verify.DTYPE_OF[cfg.dtypes[0]]


def _elsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _pat(ctx: DistContext, rank: int, count: int, dtype: torch.dtype, offset: int = 0) -> torch.Tensor:
    # redop "max" keeps values in 1..8: exact in every dtype, and distinct per rank and offset.
    return verify.pattern(rank, count, dtype, redop="max", world_size=ctx.world_size, offset=offset,
                          device=ctx.device)


def _blank(ctx: DistContext, count: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.full((count,), -1, dtype=dtype, device=ctx.device)


def _wait_all(works) -> None:
    for w in works:
        if w is not None:
            w.wait()


def _cross(ctx: DistContext, a: int, b: int) -> bool:
    return ctx.node_of(a) != ctx.node_of(b)


def _barrier(ctx: DistContext) -> None:
    if ctx.backend == "nccl":
        dist.barrier(group=ctx.group, device_ids=[ctx.device.index])
    else:
        dist.barrier(group=ctx.group)


# --- builders: inputs, one iteration, the exact expected payload --------------------------------

def _pingpong(case: Case, ctx: DistContext, cfg: BenchConfig) -> Plan:
    dt, a, b = _dtype(cfg), case.src, case.dst
    count = case.size_bytes // _elsize(dt)
    me, g = ctx.rank, ctx.group
    involved = me in (a, b)
    peer = b if me == a else a
    sbuf = _pat(ctx, me, count, dt) if involved else None
    rbuf = _blank(ctx, count, dt) if involved else None

    def run():
        if me == a:
            dist.send(sbuf, b, group=g)
            dist.recv(rbuf, b, group=g)
        elif me == b:
            dist.recv(rbuf, a, group=g)
            dist.send(sbuf, a, group=g)

    return Plan(run=run, received=[rbuf] if involved else [],
                wrong=lambda: verify.count_wrong(rbuf, _pat(ctx, peer, count, dt)) if involved else 0,
                divisor=2, iteration=f"round trip {a}->{b}->{a}, blocking send/recv",
                normalisation="round trip / 2 (one-way latency, OSU osu_latency)",
                extra={"latency_definition": "one-way = round-trip time / 2", "peer": b,
                       "cross_node": _cross(ctx, a, b)})


def _window(case: Case, ctx: DistContext, cfg: BenchConfig) -> Plan:
    dt, a, b, w = _dtype(cfg), case.src, case.dst, case.window
    count = case.size_bytes // _elsize(dt)
    me, g = ctx.rank, ctx.group
    bi = case.variant == "bidirectional"
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
        works += [dist.isend(s, peer, group=g) for s in sends]
        _wait_all(works)
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

    dirs = 2 if bi else 1
    return Plan(run=run, wrong=wrong, received=recvs + ([ack_in] if involved and not bi and me == a else []),
                divisor=w * dirs,
                iteration=(f"{w} isend + {w} irecv each way between {a} and {b}, wait all" if bi else
                           f"{w} isend {a}->{b} (irecv on {b}), wait all, 1-element ack {b}->{a}"),
                normalisation=f"iteration / (window {w} x {dirs} direction(s)): time per message; "
                              "algbw = aggregate bandwidth",
                extra={"peer": b, "window": w, "directions": dirs, "cross_node": _cross(ctx, a, b)})


def _ring_step(ctx: DistContext, variant: str, sbuf: torch.Tensor, rbuf: torch.Tensor) -> None:
    me, n, g = ctx.rank, ctx.world_size, ctx.group
    nxt, prv = (me + 1) % n, (me - 1) % n
    if variant == "send_recv_parity":
        # Even ranks send first, odd ranks receive first: every blocking send meets a posted
        # recv, also for an odd world (ranks n-1 and 0, both even, are resolved by rank 0
        # finishing its send to odd rank 1 first).
        if me % 2 == 0:
            dist.send(sbuf, nxt, group=g)
            dist.recv(rbuf, prv, group=g)
        else:
            dist.recv(rbuf, prv, group=g)
            dist.send(sbuf, nxt, group=g)
    elif variant == "isend_irecv":
        _wait_all([dist.irecv(rbuf, prv, group=g), dist.isend(sbuf, nxt, group=g)])
    elif variant == "batch_isend_irecv":
        _wait_all(dist.batch_isend_irecv([dist.P2POp(dist.isend, sbuf, nxt, g),
                                          dist.P2POp(dist.irecv, rbuf, prv, g)]))
    else:
        raise ValueError(f"unknown ring variant {variant!r}")


def _ring(case: Case, ctx: DistContext, cfg: BenchConfig) -> Plan:
    dt = _dtype(cfg)
    count = case.size_bytes // _elsize(dt)
    n, me = ctx.world_size, ctx.rank
    sbuf, rbuf = _pat(ctx, me, count, dt), _blank(ctx, count, dt)
    return Plan(run=lambda: _ring_step(ctx, case.variant, sbuf, rbuf), received=[rbuf],
                wrong=lambda: verify.count_wrong(rbuf, _pat(ctx, (me - 1) % n, count, dt)),
                iteration="every rank sends to rank+1 and receives from rank-1",
                extra={"cross_node_links": sum(_cross(ctx, r, (r + 1) % n) for r in range(n))})


def _exchange(case: Case, ctx: DistContext, cfg: BenchConfig) -> Plan:
    """Ranks 0 and 1 swap buffers with one of the orderings that cannot deadlock."""
    dt = _dtype(cfg)
    count = max(1, case.size_bytes // _elsize(dt))
    me, g = ctx.rank, ctx.group
    involved = me in (0, 1)
    peer = 1 - me if involved else -1
    sbuf = _pat(ctx, me, count, dt) if involved else None
    rbuf = _blank(ctx, count, dt) if involved else None

    def run():
        if not involved:
            return
        if case.variant == "send_recv_parity":
            if me == 0:
                dist.send(sbuf, peer, group=g)
                dist.recv(rbuf, peer, group=g)
            else:
                dist.recv(rbuf, peer, group=g)
                dist.send(sbuf, peer, group=g)
        elif case.variant == "isend_irecv":
            _wait_all([dist.irecv(rbuf, peer, group=g), dist.isend(sbuf, peer, group=g)])
        else:
            _wait_all(dist.batch_isend_irecv([dist.P2POp(dist.isend, sbuf, peer, g),
                                              dist.P2POp(dist.irecv, rbuf, peer, g)]))

    return Plan(run=run, received=[rbuf] if involved else [],
                wrong=lambda: verify.count_wrong(rbuf, _pat(ctx, peer, count, dt)) if involved else 0,
                iteration=f"ranks 0 and 1 swap one message ({case.variant})",
                extra={"peer": 1, "cross_node": _cross(ctx, 0, 1)})


def _pipeline(case: Case, ctx: DistContext, cfg: BenchConfig) -> Plan:
    dt, m = _dtype(cfg), case.microbatches
    count = case.size_bytes // _elsize(dt)
    s, me, g = ctx.world_size, ctx.rank, ctx.group
    if me == 0:
        bufs = [_pat(ctx, 0, count, dt, offset=j * count) for j in range(m)]
        received = []
    else:
        bufs = [_blank(ctx, count, dt) for _ in range(m)]
        received = bufs

    def run():
        for j in range(m):
            if me > 0:
                dist.recv(bufs[j], me - 1, group=g)
                bufs[j].add_(1)  # the stage's "layer": exact, so the last stage can check it
            if me < s - 1:
                dist.send(bufs[j], me + 1, group=g)

    def wrong():
        if me == 0:
            return 0
        return sum(verify.count_wrong(bufs[j], _pat(ctx, 0, count, dt, offset=j * count) + me) for j in range(m))

    return Plan(run=run, wrong=wrong, received=received,
                iteration=f"{m} micro-batch(es) of {case.size_bytes} B through {s} stages (rank i -> i+1, "
                          "blocking send/recv, each stage adds 1)",
                normalisation="none: time of the whole pipeline; size_bytes = micro-batches x micro-batch bytes",
                extra={"stages": s, "microbatches": m, "microbatch_bytes": case.size_bytes,
                       "ideal_bubble": (s - 1) / (m + s - 1),
                       "cross_node_links": sum(_cross(ctx, r, r + 1) for r in range(s - 1))})


def _producer(case: Case, ctx: DistContext, cfg: BenchConfig) -> Plan:
    dt = _dtype(cfg)
    count = case.size_bytes // _elsize(dt)
    n, me, g = ctx.world_size, ctx.rank, ctx.group
    distinct = case.variant in ("isend_each_distinct", "scatter")

    def expected(r: int) -> torch.Tensor:
        return _pat(ctx, 0, count, dt, offset=r * count if distinct else 0)

    if case.variant == "scatter":
        chunks = [expected(r) for r in range(n)] if me == 0 else None
        out = _blank(ctx, count, dt)
        return Plan(run=lambda: dist.scatter(out, scatter_list=chunks, src=0, group=g), received=[out],
                    wrong=lambda: verify.count_wrong(out, expected(me)),
                    iteration="scatter from rank 0 (a distinct chunk per rank, rank 0 keeps its own)",
                    extra={"consumers": n - 1, "delivered_bytes": (n - 1) * case.size_bytes})
    if case.variant == "broadcast":
        buf = expected(0) if me == 0 else _blank(ctx, count, dt)
        return Plan(run=lambda: dist.broadcast(buf, src=0, group=g), received=[buf] if me else [],
                    wrong=lambda: verify.count_wrong(buf, expected(0)) if me else 0,
                    iteration="broadcast from rank 0",
                    extra={"consumers": n - 1, "delivered_bytes": (n - 1) * case.size_bytes})
    # isend to each consumer: the p2p fan-out the source describes for asymmetric work
    sends: dict = {}
    if me == 0:
        one = None if distinct else expected(0)
        sends = {r: expected(r) if distinct else one for r in range(1, n)}
    rbuf = _blank(ctx, count, dt) if me else None

    def run():
        if me == 0:
            _wait_all([dist.isend(t, r, group=g) for r, t in sends.items()])
        else:
            dist.recv(rbuf, 0, group=g)

    return Plan(run=run, received=[rbuf] if me else [],
                wrong=lambda: verify.count_wrong(rbuf, expected(me)) if me else 0,
                iteration=f"rank 0 isends {'a distinct chunk' if distinct else 'the same buffer'} to each "
                          "consumer, waits all; consumers recv",
                extra={"consumers": n - 1, "delivered_bytes": (n - 1) * case.size_bytes})


def _control(case: Case, ctx: DistContext, cfg: BenchConfig) -> Plan:
    n, me, g = ctx.world_size, ctx.rank, ctx.group
    if case.variant == "barrier":
        return Plan(run=lambda: _barrier(ctx), wrong=lambda: 0, received=[],
                    iteration="dist.barrier", extra={"signal_bytes": 0})
    go = _pat(ctx, 0, 1, SIGNAL_DTYPE)
    ready = _pat(ctx, me, 1, SIGNAL_DTYPE)
    got = _blank(ctx, 1, SIGNAL_DTYPE)
    readies = {r: _blank(ctx, 1, SIGNAL_DTYPE) for r in range(1, n)} if me == 0 and case.variant == "ready_go" else {}

    def run():
        if me == 0:
            if case.variant == "ready_go":
                _wait_all([dist.irecv(t, r, group=g) for r, t in readies.items()])
            _wait_all([dist.isend(go, r, group=g) for r in range(1, n)])
        else:
            if case.variant == "ready_go":
                dist.send(ready, 0, group=g)
            dist.recv(got, 0, group=g)

    def wrong():
        if me:
            return verify.count_wrong(got, go)
        return sum(verify.count_wrong(t, _pat(ctx, r, 1, SIGNAL_DTYPE)) for r, t in readies.items())

    it = ("rank 0 isends a 4-byte signal to every rank" if case.variant == "signal" else
          "every rank sends 'ready' to rank 0, rank 0 answers 'go' to all (a barrier built from p2p)")
    return Plan(run=run, wrong=wrong, received=([got] if me else list(readies.values())),
                iteration=it, extra={"signal_bytes": _elsize(SIGNAL_DTYPE)})


def _barrier_cost(case: Case, ctx: DistContext, cfg: BenchConfig) -> Plan:
    dt, k = _dtype(cfg), case.steps
    count = case.size_bytes // _elsize(dt)
    n, me = ctx.world_size, ctx.rank
    sbufs = [_pat(ctx, me, count, dt, offset=i * count) for i in range(k)]
    rbufs = [_blank(ctx, count, dt) for _ in range(k)]
    with_barrier = case.variant == "barrier_each_step"

    def run():
        for i in range(k):
            _ring_step(ctx, "isend_irecv", sbufs[i], rbufs[i])
            if with_barrier:
                _barrier(ctx)

    return Plan(run=run, received=rbufs,
                wrong=lambda: sum(verify.count_wrong(r, _pat(ctx, (me - 1) % n, count, dt, offset=i * count))
                                  for i, r in enumerate(rbufs)),
                divisor=k,
                iteration=f"{k} ring steps (isend/irecv)" + (", barrier after each" if with_barrier else ""),
                normalisation=f"iteration / {k}: time per step",
                extra={"steps": k, "barrier_each_step": with_barrier})


def _batching(case: Case, ctx: DistContext, cfg: BenchConfig) -> Plan:
    dt, k, a, b = _dtype(cfg), case.k, case.src, case.dst
    c = case.size_bytes // _elsize(dt)
    me, g = ctx.rank, ctx.group
    sends = [_pat(ctx, a, c, dt, offset=j * c) for j in range(k)] if me == a else []
    recvs = [_blank(ctx, c, dt) for _ in range(k)] if me == b else []
    flat = torch.empty(k * c, dtype=dt, device=ctx.device) if me in (a, b) else None
    v = case.variant

    def run():
        if me not in (a, b):
            return
        if v == "send_each":
            for s in sends:
                dist.send(s, b, group=g)
            for r in recvs:
                dist.recv(r, a, group=g)
        elif v == "isend_each":
            _wait_all([dist.isend(s, b, group=g) for s in sends] + [dist.irecv(r, a, group=g) for r in recvs])
        elif v == "batch_isend_irecv":
            _wait_all(dist.batch_isend_irecv([dist.P2POp(dist.isend, s, b, g) for s in sends] +
                                             [dist.P2POp(dist.irecv, r, a, g) for r in recvs]))
        elif me == a:  # coalesced: pack, one send
            torch.cat(sends, out=flat)
            dist.send(flat, b, group=g)
        else:  # one recv, unpack
            dist.recv(flat, a, group=g)
            for j, r in enumerate(recvs):
                r.copy_(flat[j * c:(j + 1) * c])

    return Plan(run=run, received=recvs,
                wrong=lambda: sum(verify.count_wrong(r, _pat(ctx, a, c, dt, offset=j * c))
                                  for j, r in enumerate(recvs)),
                iteration=f"{k} messages of {case.size_bytes} B {a}->{b} ({v}"
                          + ("; pack + unpack copies included" if v == "coalesced" else "") + ")",
                normalisation=f"none: time for all {k} messages; size_bytes = {k} x message bytes",
                extra={"peer": b, "k_messages": k, "message_bytes": case.size_bytes,
                       "cross_node": _cross(ctx, a, b)})


PATTERNS: dict[str, Callable[[Case, DistContext, BenchConfig], Plan]] = {
    "pingpong": _pingpong, "pair_matrix": _pingpong, "window": _window, "ring": _ring,
    "exchange": _exchange, "pipeline": _pipeline, "producer": _producer, "control": _control,
    "barrier_cost": _barrier_cost, "batching": _batching,
}

OP_OF = {"producer": {"broadcast": "broadcast", "scatter": "scatter"}, "control": {"barrier": "barrier"}}
"""Record ``op``: the collective's name where one is measured, else ``send_recv``."""


# --- cases --------------------------------------------------------------------------------------

def world_size_from_env() -> int:
    for name in ("WORLD_SIZE", "SLURM_NTASKS"):
        if name in os.environ:
            return int(os.environ[name])
    return 1


def cases_for(cfg: BenchConfig, n: int) -> list[Case]:
    """Every case for the run's sweep and world size (identical on all ranks)."""
    el = _elsize(verify.DTYPE_OF[cfg.dtypes[0]])
    sizes = sorted({s // el * el for s in cfg.sizes() if s >= el})
    ends = sorted({sizes[0], sizes[-1]}) if sizes else []
    out: list[Case] = []
    if n < 2 or not sizes:
        return out
    out += [Case(pattern="pingpong", variant="send_recv", size_bytes=s, src=0, dst=r)
            for r in range(1, n) for s in sizes]
    out += [Case(pattern="pair_matrix", variant="send_recv", size_bytes=s, src=a, dst=b)
            for s in ends for a in range(n) for b in range(n) if a != b]
    for variant in ("unidirectional", "bidirectional"):
        out += [Case(pattern="window", variant=variant, size_bytes=s, src=0, dst=n - 1,
                     window=max(1, min(WINDOW, WINDOW_MAX_BYTES // s))) for s in sizes]
    out += [Case(pattern="ring", variant=v, size_bytes=s) for v in RING_VARIANTS for s in sizes]
    out += [Case(pattern="exchange", variant=v, size_bytes=0, src=0, dst=1) for v in EXCHANGE_VARIANTS]
    out += [Case(pattern="pipeline", variant="send_recv", size_bytes=sizes[-1], microbatches=m) for m in MICROBATCHES]
    out += [Case(pattern="producer", variant=v, size_bytes=s, src=0) for s in sizes for v in PRODUCER_VARIANTS]
    out += [Case(pattern="control", variant=v, size_bytes=0, src=0) for v in CONTROL_VARIANTS]
    out += [Case(pattern="barrier_cost", variant=v, size_bytes=s, steps=BARRIER_STEPS)
            for s in ends for v in ("no_barrier", "barrier_each_step")]
    out += [Case(pattern="batching", variant=v, size_bytes=sizes[0], src=0, dst=1, k=k)
            for k in BATCH_COUNTS for v in BATCHING_VARIANTS]
    return out


def case_id(c: Case) -> str:
    parts = [c.pattern, c.variant]
    if c.src >= 0 and c.dst >= 0:
        parts.append(f"{c.src}to{c.dst}")
    if c.microbatches:
        parts.append(f"M{c.microbatches}")
    if c.k:
        parts.append(f"K{c.k}")
    if c.size_bytes:
        parts.append(f"{c.size_bytes}B")
    return "-".join(parts)


def pytest_generate_tests(metafunc):
    if "case" not in metafunc.fixturenames:
        return
    n = world_size_from_env()
    cases = cases_for(metafunc.config._suite_cfg, n)
    if not cases:  # say why instead of pytest's "got empty parameter set"
        metafunc.parametrize("case", [pytest.param(None, id="p2p", marks=pytest.mark.skip(
            reason=f"point-to-point needs at least 2 ranks (world size {n})"))])
        return
    metafunc.parametrize("case", cases, ids=[case_id(c) for c in cases])


# --- the deadlock demonstration: an isolated pair of processes -----------------------------------

@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """What the isolated both-send-first pair showed."""

    backend: str
    device: str
    sizes_probed: tuple[int, ...]
    """Sizes the naive ordering was tried at, ascending, bytes (the last one hung, if any did)."""
    completed_bytes: tuple[int, ...]
    """Sizes at which both-send-first completed (the backend buffered the message)."""
    blocked_from_bytes: int | None
    """Smallest probed size at which both-send-first made no progress; None: none blocked."""
    detected_after_s: float | None
    """Seconds without progress before the hang was declared (>= hang_bound_s)."""
    hang_bound_s: float
    correct_orderings: dict
    """Ordering -> 'completed' / 'hung' / 'not run', at ``correct_orderings_bytes``."""
    correct_orderings_bytes: int
    n_wrong: int
    """Wrong elements the pair counted in every exchange that completed."""
    elapsed_s: float
    """Wall time of the whole probe, start-up included."""
    killed: bool
    """Whether the pair had to be killed (it hung)."""
    error: str | None = None
    naive_ordering: str = "both ranks: blocking send to the other, then recv"


_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                  "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS")
_TAG = "P2P-PROBE"


def _child_env() -> dict:
    # The pair must not join the suite's rendezvous: drop torchrun's variables (with
    # TORCHELASTIC_USE_AGENT_STORE set, c10d would connect to the agent's store).
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_VARS and not k.startswith("TORCHELASTIC")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_deadlock_probe(backend: str = "gloo", device: str = "cpu", probe: DeadlockProbe = PROBE) -> ProbeResult:
    """Start two processes that both call blocking ``send`` first; find where they block.

    The pair first runs the correct orderings at the largest probe size, then the
    naive one at ascending sizes. Each step must be reported by both processes
    within ``hang_bound_s``; the first that is not is the hang, and both processes
    are killed. Never blocks the caller for more than ``total_limit_s`` (+ kill time).
    A pair that dies before it is up (the free port was taken meanwhile) is started
    once more, within the same cap.
    """
    start = time.monotonic()
    res = _probe_once(backend, device, probe, start)
    if res.error and res.error.startswith(_START_FAILED) and time.monotonic() - start < probe.total_limit_s / 2:
        res = _probe_once(backend, device, probe, start)
    return res


_START_FAILED = "the probe pair did not come up"


def _probe_once(backend: str, device: str, probe: DeadlockProbe, start: float) -> ProbeResult:
    port = _free_port()
    big = probe.sizes[-1]
    sizes_arg = ",".join(str(s) for s in probe.sizes)
    # The pair's own group timeout outlives our bound, so a hang is ours to detect, and
    # ends an orphaned pair on its own if this process dies.
    pg_timeout = probe.total_limit_s + 15
    procs = [subprocess.Popen([sys.executable, "-m", "experiments.p2p", "--deadlock-child", str(r), str(port),
                               backend, device, str(big), sizes_arg, str(pg_timeout)],
                              cwd=ROOT, env=_child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    events: queue.Queue = queue.Queue()
    tails: list[list[str]] = [[], []]

    def reader(r: int, stream) -> None:
        for line in stream:
            line = line.strip()
            if line.startswith(_TAG):
                events.put((r, line[len(_TAG):].split()))
            elif line:
                tails[r] = (tails[r] + [line])[-5:]
        events.put((r, ["eof"]))

    threads = [threading.Thread(target=reader, args=(r, p.stdout), daemon=True) for r, p in enumerate(procs)]
    for t in threads:
        t.start()

    # The steps both processes must report, in order.
    steps = [("ready", 0)] + [(o, big) for o in EXCHANGE_VARIANTS] + [("naive", s) for s in probe.sizes] + \
        [("done", 0)]
    seen: dict = {}
    step, n_wrong, error = 0, 0, None
    hung_step, stalled_s = None, None
    last_progress = time.monotonic()
    while step < len(steps):
        now = time.monotonic()
        limit = probe.start_limit_s if step == 0 else probe.hang_bound_s
        if now - start > probe.total_limit_s:
            error = f"probe exceeded its {probe.total_limit_s:.0f} s cap"
            hung_step = step if step > 0 else None
            break
        try:
            r, words = events.get(timeout=max(0.05, min(0.25, limit - (now - last_progress))))
        except queue.Empty:
            if time.monotonic() - last_progress >= limit:
                if step == 0:
                    error = f"the probe pair did not start within {limit:.0f} s"
                else:
                    hung_step, stalled_s = step, time.monotonic() - last_progress
                break
            continue
        if words == ["eof"]:
            if r in seen.get(("done", 0), ()):
                continue  # finished normally; the other one may still be reporting
            code = procs[r].poll()
            error = (f"{_START_FAILED}: " if step == 0 else "") + \
                f"probe process {r} exited early (status {code}): " + " | ".join(tails[r])[-400:]
            break
        name, size = words[0], int(words[1]) if len(words) > 1 else 0
        n_wrong += int(words[2]) if len(words) > 2 else 0
        seen.setdefault((name, size), set()).add(r)
        while step < len(steps) and seen.get(steps[step]) == {0, 1}:
            step += 1
            last_progress = time.monotonic()

    killed = False
    for p in procs:
        if p.poll() is None:
            p.kill()  # our own children, by handle
            killed = True
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    for t in threads:
        t.join(timeout=2)

    done = {s for s in probe.sizes if seen.get(("naive", s)) == {0, 1}}
    probed = tuple(s for s in probe.sizes if s in done or (hung_step is not None and steps[hung_step] == ("naive", s)))
    orderings = {}
    for i, o in enumerate(EXCHANGE_VARIANTS, start=1):
        if seen.get((o, big)) == {0, 1}:
            orderings[o] = "completed"
        elif hung_step == i:
            orderings[o] = "hung"
        else:
            orderings[o] = "not run"
    blocked = steps[hung_step][1] if hung_step is not None and steps[hung_step][0] == "naive" else None
    if hung_step is not None and steps[hung_step][0] != "naive" and error is None:
        error = f"correct ordering {steps[hung_step][0]} did not complete within {probe.hang_bound_s} s"
    return ProbeResult(backend=backend, device=device, sizes_probed=probed, completed_bytes=tuple(sorted(done)),
                       blocked_from_bytes=blocked, detected_after_s=stalled_s if blocked else None,
                       hang_bound_s=probe.hang_bound_s, correct_orderings=orderings, correct_orderings_bytes=big,
                       n_wrong=n_wrong, elapsed_s=time.monotonic() - start, killed=killed, error=error)


def _probe_child(rank: int, port: int, backend: str, device: str, big: int, sizes: list[int],
                 timeout_s: float) -> None:
    """One process of the probe pair (``python -m experiments.p2p --deadlock-child ...``)."""
    dev = torch.device("cuda", rank) if device == "cuda" else torch.device("cpu")
    kw = {"device_id": dev} if backend == "nccl" else {}
    if device == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=timeout_s), **kw)
    peer, dt = 1 - rank, torch.float32

    def say(*words) -> None:
        print(_TAG, *words, flush=True)

    def pat(r: int, count: int) -> torch.Tensor:
        return verify.pattern(r, count, dt, redop="max", device=dev)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)  # NCCL's send/recv block the stream, not the CPU

    say("ready")
    count = big // 4
    for ordering in EXCHANGE_VARIANTS:
        s, r = pat(rank, count), torch.full((count,), -1, dtype=dt, device=dev)
        if ordering == "send_recv_parity":
            if rank == 0:
                dist.send(s, peer)
                dist.recv(r, peer)
            else:
                dist.recv(r, peer)
                dist.send(s, peer)
        elif ordering == "isend_irecv":
            _wait_all([dist.irecv(r, peer), dist.isend(s, peer)])
        else:
            _wait_all(dist.batch_isend_irecv([dist.P2POp(dist.isend, s, peer), dist.P2POp(dist.irecv, r, peer)]))
        sync()
        say(ordering, big, verify.count_wrong(r, pat(peer, count)))
    for size in sizes:
        count = max(1, size // 4)
        s, r = pat(rank, count), torch.full((count,), -1, dtype=dt, device=dev)
        dist.send(s, peer)  # both ranks send first: the deadlock under test
        dist.recv(r, peer)
        sync()
        say("naive", size, verify.count_wrong(r, pat(peer, count)))
    say("done")
    dist.destroy_process_group()


_PROBED: dict = {}


def _probe_backend(ctx: DistContext) -> tuple[str, str]:
    # NCCL needs a GPU per process of the pair; otherwise show it with Gloo on CPU.
    if ctx.backend == "nccl" and torch.cuda.device_count() >= 2:
        return "nccl", "cuda"
    return "gloo", "cpu"


def deadlock_result(ctx: DistContext) -> dict:
    """Run the probe once per session on rank 0; every rank gets its result."""
    key = id(ctx)
    if key not in _PROBED:
        obj = [None]
        if ctx.rank == 0:
            backend, device = _probe_backend(ctx)
            try:
                obj[0] = dataclasses.asdict(run_deadlock_probe(backend, device))
            except Exception as e:  # the other ranks are waiting for an answer, not an exception
                obj[0] = {"error": f"{type(e).__name__}: {e}"}
        dist.broadcast_object_list(obj, src=0, group=ctx.group)
        _PROBED[key] = obj[0]
    return _PROBED[key]


# --- the test ------------------------------------------------------------------------------------

def _maybe_corrupt(case: Case, plan: Plan) -> None:
    """Fault injection for the suite's own tests: SUITE_INJECT_CORRUPTION=p2p (every case),
    a pattern name, a case id, or all, flips one received element on every receiving rank."""
    target = os.environ.get("SUITE_INJECT_CORRUPTION")
    if target and target in ("all", EXPERIMENT, case.pattern, case_id(case)):
        for t in plan.received:
            if t is not None and t.numel():
                t.view(-1)[0] = t.view(-1)[0] + 1
                return


def _scaled(m: Measurement, divisor: int) -> Measurement:
    if divisor == 1:
        return m
    return dataclasses.replace(m, samples_s=[s / divisor for s in m.samples_s])


def test_p2p(case: Case, dist_ctx: DistContext, bench_cfg: BenchConfig, benchmark, request):
    ctx, cfg = dist_ctx, bench_cfg
    n = ctx.world_size
    if n < 2:
        pytest.skip("point-to-point needs at least 2 ranks")
    if ctx.backend == "gloo" and ctx.device.type != "cpu":
        # ProcessGroupGloo::send/recv hand the tensor's raw pointer to the TCP transport
        # without a device check; the same decision on every rank (it comes from the config).
        pytest.skip("Gloo point-to-point takes CPU tensors only; run p2p with DEVICE=cpu or BACKEND=nccl")
    if max(case.src, case.dst) >= n:
        pytest.skip(f"ranks {case.src}/{case.dst} not in a world of {n}")
    extra: dict = {}
    if case.pattern == "exchange":
        if cfg.timeout_s < PROBE.total_limit_s + 10:
            pytest.skip(f"the deadlock probe may take {PROBE.total_limit_s:.0f} s while the other ranks wait; "
                        f"needs TIMEOUT_S >= {PROBE.total_limit_s + 10:.0f}")
        probe = deadlock_result(ctx)
        if probe["error"]:
            pytest.fail(f"deadlock demonstration failed: {probe['error']}", pytrace=False)
        extra = {"deadlock_" + k: v for k, v in probe.items()}
        size = probe["blocked_from_bytes"] or probe["correct_orderings_bytes"]
        el = _elsize(_dtype(cfg))
        case = dataclasses.replace(case, size_bytes=max(el, size // el * el))

    build = PATTERNS[case.pattern]
    # Correctness, outside the timed region: blank receive buffers, one iteration, exact check.
    check = build(case, ctx, cfg)
    for t in check.received:
        t.fill_(-1)
    check.run()
    ctx.sync_device()
    _maybe_corrupt(case, check)
    local_wrong = check.wrong() + (extra.get("deadlock_n_wrong", 0) if ctx.rank == 0 else 0)
    n_wrong = verify.global_wrong(local_wrong, ctx.group, ctx.device)
    del check

    plan = build(case, ctx, cfg)
    # One op_fn call is one whole pattern iteration and returns only when it is complete,
    # so the samples are blocking whatever the run's timing mode.
    m = _scaled(measure(ctx, cfg, lambda async_op: plan.run(), mode="blocking"), plan.divisor)
    dt = cfg.dtypes[0]
    el = _elsize(_dtype(cfg))
    size = case.size_bytes
    if case.pattern == "pipeline":
        size = case.size_bytes * case.microbatches
    elif case.pattern == "batching":
        size = case.size_bytes * case.k
    elif case.pattern == "control":
        size = 0 if case.variant == "barrier" else _elsize(SIGNAL_DTYPE)
        dt = "none" if case.variant == "barrier" else "int32"
        el = _elsize(SIGNAL_DTYPE)
    op = OP_OF.get(case.pattern, {}).get(case.variant, "send_recv")
    rec = make_record(experiment=EXPERIMENT, op=op, backend=ctx.backend, device=ctx.device.type, dtype=dt,
                      world_size=n, size_bytes=size, count=size // el, in_place=False, m=m, n_wrong=n_wrong,
                      bw_op="barrier" if op == "barrier" else "send_recv",
                      pattern=case.pattern, variant=case.variant, src=case.src, dst=case.dst,
                      label=case_id(case), iteration=plan.iteration, time_divisor=plan.divisor,
                      time_normalisation=plan.normalisation, requested_timing_mode=cfg.timing_mode,
                      hosts=len(set(ctx.hostnames)), nodes=[ctx.node_of(r) for r in range(n)],
                      **plan.extra, **extra)
    submit(request, benchmark, m, rec)


def _main(argv: list[str]) -> int:
    if len(argv) == 8 and argv[0] == "--deadlock-child":
        _, rank, port, backend, device, big, sizes, timeout_s = argv
        _probe_child(int(rank), int(port), backend, device, int(big), [int(s) for s in sizes.split(",")],
                     float(timeout_s))
        return 0
    print("usage: python -m experiments.p2p --deadlock-child RANK PORT BACKEND DEVICE BIG SIZES TIMEOUT_S\n"
          "(internal: one process of the deadlock probe pair; run the experiment with suite.launch)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
