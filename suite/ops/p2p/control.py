"""``control``: a 4-byte signal from rank 0 to everyone, a ready/go handshake built from p2p (what a
barrier does), and ``barrier`` itself."""

from __future__ import annotations

import torch
import torch.distributed as dist

from suite.harness import verify
from suite.case import Buffers, Bytes, Case, wait_all
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.ops.collectives import BARRIER_UNCHECKED, elsize
from suite.ops.p2p.pattern import Pattern, Spec, Sweep, blank, buffers, make_case, pat
from suite.harness.timing import barrier

SIGNAL_DTYPE = torch.int32
"""Control messages are one int32 element (4 bytes)."""


def build(ctx: DistContext, s: Spec) -> Buffers:
    n, me, g = ctx.world_size, ctx.rank, ctx.group
    if s.variant == "barrier":
        return buffers(ctx, lambda: barrier(ctx), lambda: 0, [])
    go = pat(ctx, 0, 1, SIGNAL_DTYPE)
    ready = pat(ctx, me, 1, SIGNAL_DTYPE)
    got = blank(ctx, 1, SIGNAL_DTYPE)
    readies = {r: blank(ctx, 1, SIGNAL_DTYPE) for r in range(1, n)} if me == 0 and s.variant == "ready_go" else {}

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
        return sum(verify.count_wrong(t, pat(ctx, r, 1, SIGNAL_DTYPE)) for r, t in readies.items())

    return buffers(ctx, run, wrong, [got] if me else list(readies.values()), sent=[ready] if me else [go])


def _bytes(s: Spec) -> Bytes:
    """One int32 signal; a barrier moves no data."""
    if s.variant == "barrier":
        return Bytes(size_bytes=0, count=0, dtype="none", bw_op="barrier", definition="a barrier moves no data")
    el = elsize("int32")
    return Bytes(size_bytes=el, count=1, dtype="int32", bw_op="send_recv", definition="one int32 signal (4 bytes)")


_ITERATION = {
    "signal": "rank 0 isends a 4-byte signal to every rank",
    "ready_go": "every rank sends 'ready' to rank 0, rank 0 answers 'go' to all (a barrier built from p2p)",
    "barrier": "dist.barrier",
}


def _declare(cfg: BenchConfig, n: int, sw: Sweep, experiment: str) -> list[Case]:
    el = elsize("int32")
    return [
        make_case(
            PATTERN,
            Spec(pattern=PATTERN.name, variant=v, size_bytes=0, dtype=sw.dtype, src=0),
            _ITERATION[v],
            experiment=experiment,
            fields={"signal_bytes": 0 if v == "barrier" else el},
            unchecked=BARRIER_UNCHECKED if v == "barrier" else None,
        )
        for v in PATTERN.variants
    ]


PATTERN = Pattern(
    name="control",
    variants=("signal", "ready_go", "barrier"),
    build=build,
    declare=_declare,
    bytes=_bytes,
    collectives=("barrier",),
)
