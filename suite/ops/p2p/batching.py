"""``batching``: K small messages rank 0 -> 1 sent one by one, with ``isend``, with ``batch_isend_irecv``,
and packed into one coalesced buffer (pack and unpack included); time is per K messages."""

from __future__ import annotations

import torch
import torch.distributed as dist

from suite.harness import verify
from suite.case import Buffers, Bytes, Case, wait_all
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.ops.collectives import elsize
from suite.ops.p2p.pattern import Pattern, Spec, Sweep, blank, both_ends, buffers, cross, make_case, pat, wrong_messages

BATCH_COUNTS = (8, 64)
"""K, the number of small messages in the batching comparison."""


def build(ctx: DistContext, s: Spec) -> Buffers:
    dt, k, a, b, c = s.dt, s.k, s.src, s.dst, s.count
    me, g = ctx.rank, ctx.group
    sends = [pat(ctx, a, c, dt, offset=j * c) for j in range(k)] if me == a else []
    recvs = [blank(ctx, c, dt) for _ in range(k)] if me == b else []
    flat = verify.output(k * c, dt, ctx.device, misalign=ctx.check_run) if me in (a, b) else None
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

    return buffers(
        ctx,
        run,
        lambda: wrong_messages(ctx, recvs, a, c, dt),
        recvs + ([flat] if me == b else []),  # the packed message too: its guard bands
        sent=sends,
        cross_node=cross(ctx, a, b),
    )


def _bytes(s: Spec) -> Bytes:
    """K messages: ``size_bytes`` counts all of them (busbw factor: send/recv, 1)."""
    size = s.size_bytes * s.k
    return Bytes(
        size_bytes=size,
        count=size // elsize(s.dtype),
        dtype=s.dtype,
        bw_op="send_recv",
        definition="K messages x message bytes",
    )


def _declare(cfg: BenchConfig, n: int, sw: Sweep, experiment: str) -> list[Case]:
    size = sw.sizes[0]
    return [
        make_case(
            PATTERN,
            Spec(pattern=PATTERN.name, variant=v, size_bytes=size, dtype=sw.dtype, src=0, dst=1, k=k),
            f"{k} messages of {size} B 0->1 ({v}"
            + ("; pack + unpack copies included" if v == "coalesced" else "")
            + ")",
            experiment=experiment,
            normalisation=f"none: time for all {k} messages; size_bytes = {k} x message bytes",
            fields={"peer": 1, "message_bytes": size, "k_counts": list(BATCH_COUNTS)},
        )
        for k in BATCH_COUNTS
        for v in PATTERN.variants
    ]


PATTERN = Pattern(
    name="batching",
    variants=("send_each", "isend_each", "batch_isend_irecv", "coalesced"),
    build=build,
    declare=_declare,
    bytes=_bytes,
    reported_ranks=both_ends,
)
