"""What every point-to-point pattern shares, and the ``Pattern`` each file of suite/ops/p2p/ fills.

Every case checks the exact payload on every receiving rank, outside the timed region and in the
timed buffers, and counts wrong elements across ranks.

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
are recorded with its cases. The harness (suite/harness/runner.py) does the rest.

A ``Pattern`` is nccl-tests' ``struct testColl``: one file per pattern fills its hooks (name, variants,
bytes, build, declare, ...), and ``make_case`` turns a pattern and a ``Spec`` into a ``Case``.

This module imports neither pytest nor the harness (like suite/ops/collectives.py for the collectives).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from suite.harness import verify
from suite.case import Buffers, Bytes, Case, NeedsRanks, Session, Timing
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.common.backends import record_of
from suite.ops.collectives import elsize


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


@dataclass(frozen=True)
class Sweep:
    """The run's message sizes for the first dtype (identical on all ranks)."""

    dtype: str
    sizes: list[int]
    ends: list[int]
    """Smallest and largest size."""


def message_bytes(s: Spec) -> Bytes:
    """The byte model of send/recv: ``size_bytes`` counts one message (busbw factor 1)."""
    return Bytes(
        size_bytes=s.size_bytes,
        count=s.size_bytes // elsize(s.dtype),
        dtype=s.dtype,
        bw_op="send_recv",
        definition="bytes of one message",
    )


Resolve = Callable[[Case, DistContext, BenchConfig, Session], Case]


@dataclass(frozen=True, kw_only=True)
class Pattern:
    """One point-to-point pattern: the hooks its declarations, the harness and the p2p table use.

    One file of suite/ops/p2p/ fills one (its ``PATTERN``); suite/ops/p2p/__init__.py lists them in
    ``PATTERNS``."""

    name: str
    variants: tuple[str, ...]
    """Every variant the pattern declares, in the table's column order (the one definition of the list)."""
    build: Callable[[DistContext, Spec], Buffers]
    """One rank's inputs, one whole iteration (the call) and its exact check."""
    declare: Callable[[BenchConfig, int, Sweep, str], list[Case]]
    """The pattern's cases for the run's config, world size and sweep, named for the experiment (the last
    argument) that declares them."""
    bytes: Callable[[Spec], Bytes] = message_bytes
    """The byte model: what ``size_bytes`` counts for algbw, and the busbw op."""
    collectives: tuple[str, ...] = ()
    """Variants that are the torch.distributed collective of the same name (the record's ``op``); the
    others are ``send_recv``."""
    resolve: Callable[[Spec], Resolve] | None = None
    """A case completed at run time (the exchange's size, ping-pong's K)."""
    reported_ranks: Callable[[Spec], tuple[tuple[int, ...], str]] | None = None
    """Whose own times the per-rank fields report, and how the provenance says it; None: every rank's."""
    skip: Callable[[Spec, BenchConfig], str | None] | None = None
    """A reason of the pattern's own not to run a case, after the checks every pattern shares."""


# --- helpers of the builders ------------------------------------------------------------------------


def pat(ctx: DistContext, rank: int, count: int, dtype: torch.dtype, offset: int = 0) -> torch.Tensor:
    # Messages only move: any exact value, distinct per (sender, global element index), so a
    # dropped, duplicated or reordered message (message j sits at offset j * count) is seen.
    return verify.pattern(
        rank, count, dtype, redop="none", world_size=ctx.world_size, offset=offset, device=ctx.device, seed=ctx.seed
    )


def wrong_messages(ctx: DistContext, received: list, sender: int, count: int, dtype: torch.dtype) -> int:
    """Wrong elements of ``received``, the messages of one sender in order (message j: its pattern at offset
    j * count), checked as one: a message in another's place is named as misplaced data."""
    if not received:
        return 0
    return verify.count_wrong(torch.cat(received), pat(ctx, sender, count * len(received), dtype))


def blank(ctx: DistContext, count: int, dtype: torch.dtype) -> torch.Tensor:
    """A receive buffer: poison inside guard bands (verify.output), misaligned in the check run."""
    return verify.output(count, dtype, ctx.device, misalign=ctx.check_run)


def cross(ctx: DistContext, a: int, b: int) -> bool:
    return ctx.node_of(a) != ctx.node_of(b)


def _nodes(ctx: DistContext) -> list[int]:
    return [ctx.node_of(r) for r in range(ctx.world_size)]


def buffers(
    ctx: DistContext, run: Callable[[], None], check: Callable[[], int], received: list, *, sent=(), **fields
) -> Buffers:
    """One pattern iteration as the harness calls it (the mode is fixed: blocking); ``sent``: the messages this
    rank sends (a send leaves them as they were)."""
    sent = [t for t in sent if t is not None]
    return Buffers(
        call=lambda async_op: run(),
        check=check,
        outputs=lambda: received,
        inputs=lambda: sent,
        fields={"nodes": _nodes(ctx), **fields},
    )


# --- from a pattern and a spec to a case ------------------------------------------------------------


def skip_of(p: Pattern, s: Spec):
    """The case's skip: what every pattern needs of the world and backend, then the pattern's own reason."""

    def skip(ctx: DistContext, cfg: BenchConfig) -> str | None:
        n = ctx.world_size
        if n < 2:
            return NeedsRanks(2, "point-to-point needs at least 2 ranks")
        if ctx.device.type != "cpu" and "p2p_cuda" in record_of(ctx.backend).cannot:
            # the same decision on every rank (it comes from the config)
            return record_of(ctx.backend).cannot["p2p_cuda"]
        if max(s.src, s.dst) >= n:
            return NeedsRanks(max(s.src, s.dst) + 1, f"ranks {s.src}/{s.dst} not in a world of {n}")
        return p.skip(s, cfg) if p.skip else None

    return skip


def make_case(
    p: Pattern,
    s: Spec,
    iteration: str,
    *,
    experiment: str,
    divisor: int = 1,
    normalisation: str = "none: time of one iteration",
    fields: dict | None = None,
    provenance: dict | None = None,
    unchecked: str | None = None,
) -> Case:
    """The case of ``s``, a spec of pattern ``p``, in ``experiment`` (``iteration``: what one iteration does)."""
    identity = {"pattern": s.pattern, "variant": s.variant, "src": s.src, "dst": s.dst}
    for name, v in (("window", s.window), ("k_messages", s.k), ("steps", s.steps)):
        if v:
            identity[name] = v
    case = Case(
        experiment=experiment,
        op=s.variant if s.variant in p.collectives else "send_recv",
        label=label_of(s),
        identity=identity,
        bytes=p.bytes(s),
        build=lambda ctx, session: p.build(ctx, s),
        unchecked=unchecked,
        # the variants that share this case's table (a pattern's own list; the producer's per meaning of the
        # size): a variant that did not run keeps its column
        fields={"iteration": iteration, "columns": list(p.variants), **(fields or {})},
        provenance=provenance or {},
        timing=Timing(mode="blocking", divisor=divisor, normalisation=normalisation),
        skip=skip_of(p, s),
        # the exchange's size and deadlock_* fields are found at run time
        resolve=p.resolve(s) if p.resolve else None,
    )
    return _rank_fields(p, case, s)


def initiator(s: Spec) -> tuple[tuple[int, ...], str]:
    """Ping-pong's reported rank: the initiator's own clock (as OSU osu_latency times it: the responder's time
    is the same round trips seen from the other end)."""
    return (s.src,), f"the initiator's own clock (rank {s.src}, as OSU osu_latency times it)"


def both_ends(s: Spec) -> tuple[tuple[int, ...], str]:
    """A pair pattern's reported ranks: the two that take part."""
    return (s.src, s.dst), f"per rank that takes part (ranks {s.src} and {s.dst})"


def _rank_fields(p: Pattern, case: Case, s: Spec) -> Case:
    """Whose own times the per-rank fields of a pair pattern report (``Pattern.reported_ranks``); the ranks that
    take no part in none (their time is ~0)."""
    if p.reported_ranks is None:
        return case
    ranks, what = p.reported_ranks(s)
    return dataclasses.replace(
        case,
        timing=dataclasses.replace(case.timing, rank_fields_of=ranks),
        provenance={
            "rank_median_us": f"measured: {what}, the median over iterations of its own time, divided as "
            "time_us is; the ranks that take no part are not in it (group_ranks: the ranks reported)",
            **case.provenance,
        },
    )
