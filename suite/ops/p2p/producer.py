"""``producer``: rank 0 feeds the others: ``isend`` to each vs ``broadcast`` (same data for all) and vs
``scatter`` (a distinct chunk each). Sizes and bus factors are the collectives experiment's (see
``_bytes``), so these records compare with it."""

from __future__ import annotations

import torch
import torch.distributed as dist

from suite.harness import verify
from suite.case import Buffers, Bytes, Case, wait_all
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.ops.collectives import elsize
from suite.ops.p2p.pattern import Pattern, Spec, Sweep, blank, buffers, make_case, pat

SAME = ("isend_each_same", "broadcast")
"""The variants that hand every consumer the same buffer (the table compares them side by side)."""
DISTINCT = ("isend_each_distinct", "scatter")
"""The variants that hand each consumer its own chunk (scatter-like)."""


def build(ctx: DistContext, s: Spec) -> Buffers:
    n, me, g = ctx.world_size, ctx.rank, ctx.group
    distinct = s.variant in DISTINCT
    dt, count = s.dt, s.count // n if distinct else s.count  # s.count: the whole buffer

    def expected(r: int) -> torch.Tensor:
        return pat(ctx, 0, count, dt, offset=r * count if distinct else 0)

    if s.variant == "scatter":
        chunks = [expected(r) for r in range(n)] if me == 0 else None
        out = blank(ctx, count, dt)
        return buffers(
            ctx,
            lambda: dist.scatter(out, scatter_list=chunks, src=0, group=g),
            lambda: verify.count_wrong(out, expected(me)),
            [out],
            sent=chunks or [],
        )
    if s.variant == "broadcast":
        buf = expected(0) if me == 0 else blank(ctx, count, dt)
        return buffers(
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
    rbuf = blank(ctx, count, dt) if me else None

    def run():
        if me == 0:
            wait_all([dist.isend(t, r, group=g) for r, t in sends.items()])
        else:
            dist.recv(rbuf, 0, group=g)

    return buffers(
        ctx,
        run,
        lambda: verify.count_wrong(rbuf, expected(me)) if me else 0,
        [rbuf] if me else [],
        sent=list(sends.values()),
    )


def _bytes(s: Spec) -> Bytes:
    """The byte model, the exception to send/recv's on purpose.

    Its ``scatter`` and ``broadcast`` are the collectives themselves, and its isend fan-outs do what they
    do, so all four are recorded as the collectives experiment records scatter and broadcast
    (suite/ops/collectives.py): S = the whole buffer (scatter: chunk x ranks) and the OP_TABLE factor
    ((n-1)/n, 1). A reader who sets a producer record beside a collectives record of the same S then
    compares like with like; the bytes that actually reach each consumer and cross the producer's link are
    the fields ``consumer_bytes`` and ``delivered_bytes``. (Naming them apart instead would leave two
    conventions for one op.)
    """
    if s.variant in DISTINCT:
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
        definition="the buffer every consumer receives (nccl-tests S of broadcast, as in the collectives experiment)",
    )


_ITERATION = {
    "scatter": "scatter from rank 0 (a distinct chunk per rank, rank 0 keeps its own)",
    "broadcast": "broadcast from rank 0",
    "isend_each_same": "rank 0 isends the same buffer to each consumer, waits all; consumers recv",
    "isend_each_distinct": "rank 0 isends a distinct chunk to each consumer, waits all; consumers recv",
}


def _declare(cfg: BenchConfig, n: int, sw: Sweep, experiment: str) -> list[Case]:
    """Sizes are the whole buffer, as the collectives experiment's: for the distinct-chunk variants a
    multiple of n elements (each rank's chunk is size / n), sizes with no whole chunk left out."""
    el = elsize(sw.dtype)
    out, seen = [], set()
    for sz in sw.sizes:
        for v in PATTERN.variants:
            distinct = v in DISTINCT
            size = sz // (el * n) * el * n if distinct else sz
            if not size or (v, size) in seen:
                continue
            seen.add((v, size))
            per = size // n if distinct else size
            out.append(
                make_case(
                    PATTERN,
                    Spec(pattern=PATTERN.name, variant=v, size_bytes=size, dtype=sw.dtype, src=0),
                    _ITERATION[v],
                    experiment=experiment,
                    fields={
                        "consumers": n - 1,
                        "consumer_bytes": per,
                        "delivered_bytes": (n - 1) * per,
                        "columns": list(DISTINCT if distinct else SAME),
                    },
                    provenance={
                        "delivered_bytes": "derived: consumers x consumer_bytes (what crosses the producer's link)"
                    },
                )
            )
    return out


PATTERN = Pattern(
    name="producer",
    variants=SAME + DISTINCT,
    build=build,
    declare=_declare,
    bytes=_bytes,
    collectives=("broadcast", "scatter"),
)
