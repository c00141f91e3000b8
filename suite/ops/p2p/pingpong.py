"""``pingpong``: rank 0 <-> each other rank over the size sweep, timed as OSU ``osu_latency`` does.

One sample is K back-to-back round trips a->b->a (blocking ``send``/``recv``) with no barrier between
them, the harness's barrier only before the sample; the recorded time is **one-way latency =
sample / (2K)**. K is found per case before it is timed (``suite.harness.autorange.autorange``: a sample lasts
at least ``PINGPONG_MIN_SAMPLE_S``, K >= ``PINGPONG_MIN_ROUND_TRIPS``), agreed by all ranks, and
recorded (``round_trips_per_sample``). With one round trip per sample the barrier's exit skew would be
part of every round trip. The pair matrix (pair_matrix.py) and the doctor's latency probe are this
ping-pong too.
"""

from __future__ import annotations

import dataclasses

import torch.distributed as dist

from suite.harness import verify
from suite.case import Buffers, Case, Session
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.ops.p2p.pattern import Pattern, Spec, Sweep, blank, buffers, cross, initiator, make_case, pat
from suite.harness.autorange import autorange

PINGPONG_MIN_SAMPLE_S = 1e-3
"""A ping-pong sample lasts at least this long: K back-to-back round trips, K found by
``suite.harness.autorange.autorange`` before the case (recorded as ``min_sample_us``)."""
PINGPONG_MIN_ROUND_TRIPS = 10
"""K is at least this, whatever the message size, so what precedes a sample (the barrier, and the
lag of the last rank to leave it) is at most 1/10 of a sample's round trips (OSU runs 1000+)."""
PINGPONG_MAX_ROUND_TRIPS = 10_000
"""K is at most this (OSU ``osu_latency``'s iteration count for small messages)."""


def build(ctx: DistContext, s: Spec) -> Buffers:
    dt, a, b, count = s.dt, s.src, s.dst, s.count
    me, g = ctx.rank, ctx.group
    involved = me in (a, b)
    peer = b if me == a else a
    sbuf = pat(ctx, me, count, dt) if involved else None
    rbuf = blank(ctx, count, dt) if involved else None

    def run():
        for _ in range(s.round_trips):  # back to back: no barrier between round trips (OSU)
            if me == a:
                dist.send(sbuf, b, group=g)
                dist.recv(rbuf, b, group=g)
            elif me == b:
                dist.recv(rbuf, a, group=g)
                dist.send(sbuf, a, group=g)

    return buffers(
        ctx,
        run,
        lambda: verify.count_wrong(rbuf, pat(ctx, peer, count, dt)) if involved else 0,
        [rbuf] if involved else [],
        sent=[sbuf],
        cross_node=cross(ctx, a, b),
    )


def resolve(s: Spec):
    """The ping-pong case with K round trips per sample, K found now on this group (every rank)."""

    def complete(case: Case, ctx: DistContext, cfg: BenchConfig, session: Session) -> Case:
        k, trial_s = autorange(
            ctx,
            build(ctx, s).call,
            min_sample_s=PINGPONG_MIN_SAMPLE_S,
            min_repeats=PINGPONG_MIN_ROUND_TRIPS,
            max_repeats=PINGPONG_MAX_ROUND_TRIPS,
        )
        at = dataclasses.replace(s, round_trips=k)
        return dataclasses.replace(
            case,
            build=lambda c, session: build(c, at),
            timing=dataclasses.replace(
                case.timing,
                divisor=2 * k,
                normalisation=f"sample / (2K), K = {k}: one-way latency (OSU osu_latency)",
            ),
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
                "round_trips_per_sample": f"derived: the K of suite.harness.autorange.autorange: the first trial of K "
                f"round trips lasting >= min_sample_us on the slowest rank, "
                f"K in [{PINGPONG_MIN_ROUND_TRIPS}, {PINGPONG_MAX_ROUND_TRIPS}]",
                "calibration_sample_us": "measured: that trial's time, maximum over ranks (host clock)",
            },
        )

    return complete


def latency_cases(p: Pattern, specs: list[Spec], *, experiment: str) -> list[Case]:
    """The ping-pong case of each spec of pattern ``p`` (src initiates; K round trips per sample, found at
    run time)."""
    # iteration, divisor and normalisation are completed once K is known (resolve)
    return [
        make_case(
            p,
            s,
            "K back-to-back round trips",
            experiment=experiment,
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


def _declare(cfg: BenchConfig, n: int, sw: Sweep, experiment: str) -> list[Case]:
    specs = [
        Spec(pattern=PATTERN.name, variant=v, size_bytes=sz, dtype=sw.dtype, src=0, dst=r)
        for v in PATTERN.variants
        for r in range(1, n)
        for sz in sw.sizes
    ]
    return latency_cases(PATTERN, specs, experiment=experiment)


PATTERN = Pattern(
    name="pingpong",
    variants=("send_recv",),
    build=build,
    declare=_declare,
    resolve=resolve,
    reported_ranks=initiator,
)
