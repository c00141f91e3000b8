"""What the contiguity cases run on one rank: a transposed view vs a contiguous tensor through all_reduce
and through send/recv (with the probe of whether send accepts a view), and the explicit copy round trip of
the view whose measured time the transposed records carry."""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.distributed as dist

from suite.api import (
    Buffers,
    Case,
    DistContext,
    Session,
    verify,
)

from .workload import summed


def matrix_shape(count: int) -> tuple[int, int]:
    """(rows, cols) with rows a power of two near sqrt(count) dividing count; (1, count) if none."""
    rows = 1 << max(0, int(math.log2(max(count, 1))) // 2)
    while rows > 1 and count % rows:
        rows //= 2
    return rows, count // rows


def _probe_noncontiguous_send(ctx: DistContext) -> str | None:
    """Whether send accepts a non-contiguous tensor (rank 0 -> 1); None if it does."""
    if ctx.world_size < 2:
        return None
    reason, work = None, None
    base = torch.zeros(2, 2, device=ctx.device)
    if ctx.rank == 0:
        try:
            work = dist.isend(base.t(), dst=1, group=ctx.group)
        except Exception as e:
            reason = f"{ctx.backend} send rejects a non-contiguous tensor: {str(e).strip().splitlines()[0][:120]}"
    flag = torch.tensor([0 if reason else 1], device=ctx.device)
    dist.broadcast(flag, src=0, group=ctx.group)
    if flag.item() and ctx.rank == 1:  # it was accepted: match it
        dist.recv(torch.zeros(4, device=ctx.device), src=0, group=ctx.group)
    if work is not None:
        work.wait()
    if not flag.item() and reason is None:
        reason = f"{ctx.backend} send rejects a non-contiguous tensor (on rank 0)"
    return reason


def contig_build(op: str, layout: str, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]
    rows, cols = matrix_shape(count)

    def view_of(base):
        # The tensor handed to torch.distributed: a (cols, rows) transposed view, or the contiguous base.
        return base.view(rows, cols).t() if layout == "transposed" else base

    def all_reduce(ctx: DistContext, session: Session) -> Buffers:
        n, me = ctx.world_size, ctx.rank
        base = verify.pattern(me, count, dt, world_size=n, device=ctx.device, seed=ctx.seed)
        v = view_of(base)
        return summed(ctx, base, lambda a: dist.all_reduce(v, group=ctx.group, async_op=a))

    def send_recv(ctx: DistContext, session: Session) -> Buffers:
        n, me = ctx.world_size, ctx.rank
        peer = me ^ 1 if (me ^ 1) < n else None  # pairs (0,1), (2,3), ...; a last odd rank sits out
        src = view_of(verify.pattern(me, count, dt, world_size=n, device=ctx.device, seed=ctx.seed))
        dst_base = torch.full((count,), -1, dtype=dt, device=ctx.device)
        dst_view = view_of(dst_base)

        def call(_a):
            if peer is None:
                return None
            # Non-contiguous: copy out before sending and into the view after receiving,
            # which is what code handing a view to send/recv has to do (explicit copies).
            s = src if src.is_contiguous() else src.contiguous()
            r = (
                dst_view
                if dst_view.is_contiguous()
                else torch.empty_like(dst_view, memory_format=torch.contiguous_format)
            )
            works = dist.batch_isend_irecv(
                [
                    dist.P2POp(dist.isend, s, peer=peer, group=ctx.group),
                    dist.P2POp(dist.irecv, r, peer=peer, group=ctx.group),
                ]
            )
            for w in works:
                w.wait()
            if r is not dst_view:
                dst_view.copy_(r)
            return None

        def check() -> int:
            if peer is None:
                return 0
            return verify.count_wrong(
                dst_base, verify.pattern(peer, count, dt, world_size=n, device=ctx.device, seed=ctx.seed)
            )

        return Buffers(call=call, check=check, outputs=lambda: [dst_base] if peer is not None else [])

    return all_reduce if op == "all_reduce" else send_recv


def resolve_send(case: Case, ctx: DistContext, session: Session) -> Case:
    reject = session.once("noncontiguous_send", lambda: _probe_noncontiguous_send(ctx))
    return dataclasses.replace(
        case,
        fields={**case.fields, "send_accepts_noncontiguous": reject is None, "send_noncontiguous_error": reject or ""},
    )


def _roundtrip_key(count: int, dtype: str) -> tuple:
    return ("contiguous_roundtrip", count, dtype)


def _roundtrip_call(view: torch.Tensor):
    """The explicit copy round trip of a non-contiguous ``view``: out to a contiguous buffer and back."""

    def call(_a):
        view.copy_(view.contiguous())
        return None

    return call


def roundtrip_build(count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]
    rows, cols = matrix_shape(count)

    def build(ctx: DistContext, session: Session) -> Buffers:
        base = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=ctx.device, seed=ctx.seed)
        expected = base.clone()

        def derive(m, around, session) -> dict:
            session.keep_baseline(_roundtrip_key(count, dtype), m)  # the transposed cases' copy time
            return {}

        return Buffers(
            call=_roundtrip_call(base.view(rows, cols).t()),
            outputs=lambda: [base],
            check=lambda: verify.count_wrong(base, expected),
            derive=derive,
        )

    return build


def with_copy_share(build, count: int, dtype: str):
    """``build`` whose timed record also carries the measured copy round trip of its view and its share."""
    dt = verify.DTYPE_OF[dtype]
    rows, cols = matrix_shape(count)

    def built(ctx: DistContext, session: Session) -> Buffers:
        b = build(ctx, session)

        def make_call():
            return _roundtrip_call(torch.zeros(count, dtype=dt, device=ctx.device).view(rows, cols).t())

        def derive(m, around, session) -> dict:
            copy = session.baseline(_roundtrip_key(count, dtype), ctx, make_call)
            return {"copy_roundtrip_us": copy.median_s * 1e6, "copy_share": copy.median_s / m.median_s}

        return dataclasses.replace(b, derive=derive)

    return built
