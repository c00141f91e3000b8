"""What each backends case runs on one rank: the lanes' groups as a case's context, the capability
matrix's probes, the ring send_recv, the all_reduce algorithms with their exact checks, and the Gloo
transport paths' groups. The declarations are in cases.py."""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from suite.api import (
    BenchConfig,
    Buffers,
    Case,
    CaseSkipped,
    DistContext,
    NeedsRanks,
    Session,
    algorithms,
    groups,
    network,
    support_reason,
    verify,
)
from suite.api import collectives as ops
from suite.api import sweep

from . import bare_mpi

ALL_DTYPES = tuple(verify.DTYPE_OF)


# --- lanes: one process group per backend (suite.harness.groups), a case runs on its lane's ---------


def on_lane(key: str):
    def context(ctx: DistContext, session: Session) -> DistContext:
        lanes = groups.lanes_of(ctx, session)
        if key in lanes.failed:
            raise CaseSkipped(lanes.failed[key])
        if key not in lanes.ctx:  # declared from the run's config, but the ranks' own plan lacks it
            why = next((r for ln, r in lanes.missing if ln.key == key), "not planned on the ranks")
            raise CaseSkipped(f"{key.replace('-', '/', 1)}: {why}")
        return lanes.ctx[key]

    return context


# --- capability matrix ---------------------------------------------------------------------


def send_recv_exchange(lctx: DistContext, dtype: str, count: int) -> Buffers:
    """Each rank sends ``count`` elements to rank+1 and receives from rank-1 (one batch): the message of this
    check repetition's seed, received into poison inside guard bands; the send buffer is left as it was."""
    n, me = lctx.world_size, lctx.rank
    right, left = (me + 1) % n, (me - 1) % n
    dt = verify.DTYPE_OF[dtype]
    send = _pattern(lctx, me, count, dt)
    recv = verify.output(count, dt, lctx.device, misalign=lctx.check_run)
    return Buffers(
        call=lambda a: algorithms.exchange(send, recv, right, left, lctx.group, wait=not a),
        check=lambda: verify.count_wrong(recv, _pattern(lctx, left, count, dt)),
        outputs=lambda: [recv],
        inputs=lambda: [send],
    )


def _pattern(lctx: DistContext, rank: int, count: int, dt: torch.dtype) -> torch.Tensor:
    """What ``rank`` contributes in this check repetition (``lctx.seed``: a stale output holds another's)."""
    return verify.pattern(rank, count, dt, world_size=lctx.world_size, device=lctx.device, seed=lctx.seed)


SUITE_BUGS = (AttributeError, NameError, KeyError, IndexError, AssertionError, ZeroDivisionError)
"""Errors a probe's builder raises when the suite is wrong, not the backend: the capability matrix
lets them fail the case instead of marking a cell "not supported"."""


def _send_recv_support(lctx: DistContext, dtype: str) -> str | None:
    if lctx.world_size < 2:
        return NeedsRanks(2, "send_recv needs at least 2 ranks")
    return support_reason(lctx, lambda: send_recv_exchange(lctx, dtype, 4), f"send_recv ({dtype})", reraise=SUITE_BUGS)


def capability_matrix(lctx: DistContext, dtypes=ALL_DTYPES) -> list[dict]:
    """Probe every registered collective form and send_recv on this lane."""
    rows = []
    dev = lctx.device.type
    for coll in ops.REGISTRY:
        if coll.variant == "barrier":
            combos = [("none", None)]
        else:
            redops = ops.REDUCE_OP if coll.variant == "all_reduce" else ("sum",) if coll.reduces else (None,)
            combos = [(d, r) for d in dtypes for r in redops]
        for dtype, redop in combos:
            for in_place in coll.in_place_forms:
                a = ops.Args(
                    variant=coll.variant,
                    dtype=dtype,
                    redop=redop,
                    size_bytes=0,
                    count=4 * lctx.world_size,
                    in_place=in_place,
                    root=0 if coll.rooted else -1,
                )
                reason = support_reason(
                    lctx,
                    lambda coll=coll, a=a: coll.build(a, lctx),
                    sweep.label_of(a).rsplit("-", 2)[0],
                    reraise=SUITE_BUGS,
                )
                rows.append(
                    {
                        "op": coll.op,
                        "variant": coll.variant,
                        "backend": lctx.backend,
                        "device": dev,
                        "dtype": dtype,
                        "redop": redop or "none",
                        "in_place": in_place,
                        "supported": reason is None,
                        "reason": reason or "",
                    }
                )
    for dtype in dtypes:
        reason = _send_recv_support(lctx, dtype)
        rows.append(
            {
                "op": "send_recv",
                "variant": "send_recv",
                "backend": lctx.backend,
                "device": dev,
                "dtype": dtype,
                "redop": "none",
                "in_place": False,
                "supported": reason is None,
                "reason": reason or "",
            }
        )
    return rows


def with_capabilities(case: Case, lctx: DistContext, cfg: BenchConfig, session: Session) -> Case:
    lanes = groups.lanes_of(lctx, session)
    missing = [{"backend": ln.backend, "device": ln.device, "reason": r} for ln, r in lanes.missing] + [
        {"backend": k.split("-")[0], "device": k.split("-")[1], "reason": r} for k, r in lanes.failed.items()
    ]
    bare = bare_mpi.lane_reason(lctx.device.type)
    if bare is not None:
        missing.append({"backend": "mpi4py", "device": "numpy", "reason": bare})
    return dataclasses.replace(
        case, fields={**case.fields, "capabilities": capability_matrix(lctx), "lanes_missing": missing}
    )


# --- algorithms: backend all_reduce vs ring on p2p vs reduce + broadcast ----------------------


def _algorithm_fn(algorithm: str, lctx: DistContext):
    g = lctx.group
    if algorithm == "all_reduce":
        return lambda t: dist.all_reduce(t, group=g)
    if algorithm == "ring_p2p":
        return lambda t: algorithms.ring_all_reduce(t, g)
    if algorithm == "reduce_broadcast":
        return lambda t: algorithms.naive_all_reduce(t, g)
    raise ValueError(f"unknown algorithm {algorithm!r}")


def algorithm_buffers(algorithm: str, dtype: str, count: int, lctx: DistContext) -> Buffers:
    dt, n = verify.DTYPE_OF[dtype], lctx.world_size

    def fresh():
        return _pattern(lctx, lctx.rank, count, dt)

    fn = _algorithm_fn(algorithm, lctx)
    reference = fresh()
    dist.all_reduce(reference, group=lctx.group)  # the backend's own answer (every rank builds alike)
    expected = verify.reduce_expected("sum", n, count, dt, device=lctx.device, seed=lctx.seed)
    # in place: the buffer is a copy of the input inside guard bands (a write past its end is seen)
    t, pristine = verify.guarded(fresh(), misalign=lctx.check_run), fresh()
    # wrong vs the exact answer, plus any element that differs from the backend's result
    return Buffers(
        call=lambda a: fn(t),
        outputs=lambda: [t],
        reset=lambda: t.copy_(pristine),
        check=lambda: verify.count_wrong_any(t, expected, reference),
    )


def model_bytes_busiest_rank(algorithm: str, size_bytes: int, n: int) -> float | None:
    """Bytes the busiest rank sends under a simple model: ring 2(n-1)/n*S; flat
    reduce+broadcast (n-1)*S at the root (it receives as much again); the
    backend's own all_reduce: unknown (it picks its algorithm)."""
    if algorithm == "ring_p2p":
        return algorithms.ring_bytes_sent_per_rank(size_bytes, n)
    if algorithm == "reduce_broadcast":
        return float((n - 1) * size_bytes)
    return None


P2P_STEP = "p2p_step"
"""The algorithms table's p2p column: one ring step, a send_recv of one ring chunk, timed blocking."""


def link_bytes(algorithm: str, count: int, elsize: int, n: int) -> tuple[int | None, int | None]:
    """(bytes one message puts on a link, messages the busiest rank sends) of one all_reduce of
    ``count`` elements: the ring sends 2(n-1) chunks of at most ceil(count/n) elements (its own
    chunks, suite.ops.algorithms.ring_chunks); flat reduce+broadcast moves the whole buffer per message,
    (n-1) into the root and (n-1) out of it; the backend's own: unknown; the p2p step: one chunk."""
    chunk = algorithms.ring_chunks(count, n)[0][1] * elsize if n > 1 else 0
    return {"ring_p2p": (chunk, 2 * (n - 1)), P2P_STEP: (chunk, 1), "reduce_broadcast": (count * elsize, n - 1)}.get(
        algorithm, (None, None)
    )


LINK_PROVENANCE = {
    "model_bytes_busiest_rank": "modelled: ring 2(n-1)/n x S per rank; reduce+broadcast (n-1) x S at the root; "
    "none for the backend's own",
    "link_bytes_per_message": "ring and p2p step: exact, the largest ring chunk ceil(count/n) x element size "
    "(suite.ops.algorithms.ring_chunks); reduce+broadcast: modelled, the whole buffer (flat); "
    "none for the backend's own",
    "link_messages": "ring: exact, 2(n-1) sends per rank; reduce+broadcast: modelled, (n-1) into and (n-1) out of "
    "the root (flat); p2p step: 1",
}


def algorithm_probe(algorithm: str, dtype: str):
    def probe(lctx: DistContext) -> Buffers:
        a = ops.Args(
            variant="all_reduce",
            dtype=dtype,
            redop="sum",
            size_bytes=0,
            count=4 * lctx.world_size,
            in_place=True,
            root=-1,
        )
        ar = ops.BY_VARIANT["all_reduce"].build(a, lctx)
        if algorithm != "ring_p2p" or lctx.world_size < 2:
            return ar
        sr = send_recv_exchange(lctx, dtype, 4)
        return Buffers(call=lambda x: [ar.call(False), sr.call(False)])

    return probe


# --- Gloo transport path: which interface the TCP transport uses ------------------------------
#
# GLOO_SOCKET_IFNAME picks the address Gloo binds and advertises; the kernel picks the path to a
# peer's address. Between ranks of one host every local address is delivered through the loopback,
# whatever the interface is called, so one host has one path; across hosts an interface is a path
# of its own only where every rank's route to every other host's address on it leaves through it.
# The comparison is offered only where the ranks share two such interfaces on different networks
# (e.g. compose nodes attached to two networks); otherwise its cases skip with the reason.


def _gloo_device_ok(iface: str) -> str | None:
    try:
        dist.ProcessGroupGloo.create_device(interface=iface)
    except Exception as e:
        return f"Gloo cannot use interface {iface!r}: {str(e).strip().splitlines()[-1][:160]}"
    return None


def _offered_paths(ctx: DistContext, session: Session) -> tuple[list[dict], str | None]:
    def plan():
        if not dist.is_gloo_available():
            return [], "gloo is not built into this torch"
        mine = {
            "host": ctx.hostnames[ctx.rank],
            "interfaces": network.local_interfaces(),
            "routes": network.route_table_text(),
        }
        ranks: list = [None] * ctx.world_size
        dist.all_gather_object(ranks, mine, group=ctx.group)
        return network.interface_paths(ranks)  # the same inputs on every rank: the same answer

    return session.once("backends.gloo_paths", plan)


def gloo_path_context(slot: int):
    def context(ctx: DistContext, session: Session) -> DistContext:
        paths, why = _offered_paths(ctx, session)
        if why:
            raise CaseSkipped(f"Gloo interface comparison not offered: {why}")
        if slot >= len(paths):
            raise CaseSkipped(f"Gloo interface comparison: {len(paths)} paths, none for slot {slot + 1}")
        iface = paths[slot]["name"]

        def make():
            reason = _gloo_device_ok(iface)
            if not ctx.agree_all(reason is None):
                return None, reason or f"interface {iface} not usable on another rank"
            return groups.gloo_on_interface(ctx, iface), None

        lctx, why = session.once(("backends.gloo_path", iface), make)
        if lctx is None:
            raise CaseSkipped(why)
        return lctx

    return context


def resolve_gloo_path(case: Case, slot: int, ctx: DistContext, session: Session) -> Case:
    paths, _ = _offered_paths(ctx, session)
    return dataclasses.replace(
        case,
        fields={
            **case.fields,
            "gloo_socket_ifname": paths[slot]["name"],
            "gloo_network": paths[slot]["network"],
            "paths_offered": [p["name"] for p in paths],
        },
    )
