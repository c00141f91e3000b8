"""``exchange`` (deadlock demonstration): ranks 0 and 1 swap one message.

An isolated pair of child processes (suite/ops/p2p/deadlock.py) calls blocking ``send`` first on both
sides for ascending sizes; the first size that makes no progress within a few seconds is reported as
where the backend blocks, and the pair is killed. The correct orderings (parity, ``isend``/``irecv``,
``batch_isend_irecv``) complete in the same pair and are timed in the suite's own group at that size.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from suite.harness import verify
from suite.case import Buffers, Case, CaseFailed, Session
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.common.backends import gloo, record_of
from suite.ops import algorithms
from suite.ops.collectives import elsize
from suite.ops.p2p.deadlock import PROBE, PROVENANCE, run_deadlock_probe
from suite.ops.p2p.pattern import (
    Pattern,
    Spec,
    Sweep,
    blank,
    both_ends,
    buffers,
    cross,
    label_of,
    make_case,
    pat,
    skip_of,
)


def build(ctx: DistContext, s: Spec) -> Buffers:
    """Ranks 0 and 1 swap buffers with one of the orderings that cannot deadlock."""
    dt = s.dt
    count = max(1, s.count)
    me, g = ctx.rank, ctx.group
    involved = me in (0, 1)
    peer = 1 - me if involved else -1
    sbuf = pat(ctx, me, count, dt) if involved else None
    rbuf = blank(ctx, count, dt) if involved else None

    def run():
        if involved:
            algorithms.exchange(sbuf, rbuf, peer, peer, g, s.variant)

    return buffers(
        ctx,
        run,
        lambda: verify.count_wrong(rbuf, pat(ctx, peer, count, dt)) if involved else 0,
        [rbuf] if involved else [],
        sent=[sbuf],
        cross_node=cross(ctx, 0, 1),
    )


# --- the deadlock probe, once per session ---------------------------------------------------------


def _probe_backend(ctx: DistContext) -> tuple[str, str]:
    # NCCL needs a GPU per process of the pair; otherwise show it with Gloo on CPU.
    if record_of(ctx.backend).one_gpu_per_rank and torch.cuda.device_count() >= 2:
        return ctx.backend, "cuda"
    return gloo.BACKEND.name, "cpu"


def _deadlock_result(ctx: DistContext) -> dict:
    """Run the probe on rank 0; every rank gets its result (a dict of ProbeResult's fields)."""
    obj = [None]
    if ctx.rank == 0:
        backend, device = _probe_backend(ctx)
        try:
            obj[0] = dataclasses.asdict(run_deadlock_probe(backend, device))
        except Exception as e:  # the other ranks are waiting for an answer, not an exception
            obj[0] = {"error": f"{type(e).__name__}: {e}"}
    dist.broadcast_object_list(obj, src=0, group=ctx.group)
    return obj[0]


def resolve(s: Spec):
    """The exchange case at the size where both-send-first blocked, with the probe's findings."""

    def complete(case: Case, ctx: DistContext, cfg: BenchConfig, session: Session) -> Case:
        probe = session.once("deadlock", lambda: _deadlock_result(ctx))
        if probe["error"]:
            raise CaseFailed(f"deadlock demonstration failed: {probe['error']}")
        size = probe["blocked_from_bytes"] or probe["correct_orderings_bytes"]
        # The pair's own wrong elements count once, on rank 0, in the check run (the first build).
        pending = [probe["n_wrong"] if ctx.rank == 0 else 0]
        return dataclasses.replace(
            at_size(case, s, size, pending),
            fields={**case.fields, **{"deadlock_" + k: v for k, v in probe.items()}},
            provenance={**case.provenance, **PROVENANCE},
        )

    return complete


def at_size(case: Case, s: Spec, size_bytes: int, pending: list[int] | None = None) -> Case:
    """The exchange case ``case`` (of spec ``s``) timed at ``size_bytes`` (rounded down to whole elements, at
    least one), with no probe left to run or wait for; ``pending``: wrong elements found elsewhere, added to
    the first check."""
    el = elsize(s.dtype)
    at = dataclasses.replace(s, size_bytes=max(el, size_bytes // el * el))
    pending = list(pending or ())

    def build_at(c: DistContext, session: Session) -> Buffers:
        b = build(c, at)
        extra = pending.pop() if pending else 0
        if extra:
            inner = b.check
            b.check = lambda: inner() + extra
        return b

    return dataclasses.replace(
        case,
        label=label_of(at),
        bytes=PATTERN.bytes(at),
        build=build_at,
        resolve=None,
        skip=skip_of(dataclasses.replace(PATTERN, skip=None), at),
    )


def _skip(s: Spec, cfg: BenchConfig) -> str | None:
    if cfg.timeout_s < PROBE.total_limit_s + 10:
        return (
            f"the deadlock probe may take {PROBE.total_limit_s:z.0f} s while the other ranks wait; "
            f"needs TIMEOUT_S >= {PROBE.total_limit_s + 10:z.0f}"
        )
    return None


def _declare(cfg: BenchConfig, n: int, sw: Sweep, experiment: str) -> list[Case]:
    # size 0: decided at run time by the deadlock probe (resolve)
    return [
        make_case(
            PATTERN,
            Spec(pattern=PATTERN.name, variant=v, size_bytes=0, dtype=sw.dtype, src=0, dst=1),
            f"ranks 0 and 1 swap one message ({v})",
            experiment=experiment,
            fields={"peer": 1},
        )
        for v in PATTERN.variants
    ]


PATTERN = Pattern(
    name="exchange",
    variants=algorithms.ORDERINGS,
    build=build,
    declare=_declare,
    resolve=resolve,
    reported_ranks=both_ends,
    skip=_skip,
)
