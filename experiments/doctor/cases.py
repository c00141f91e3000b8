"""The doctor's probes: every link, every rank, a few collectives - the evidence ``verdict.py`` judges.

``make doctor`` runs this experiment (it is not part of ``EXPERIMENTS=all``: it answers "is anything
wrong, and where", not "what does an op cost"), then ``verdict.py`` reads the stored records and
names the slow link, the straggling rank and the weak node, or says healthy. Every probe is a case
like any other (suite/case.py): built, checked, timed by the harness, with every rank's own time of
every sample kept (``keep_rank_samples``). The probes, each ``probe`` in the record:

- ``latency``: for every pair a < b, the p2p experiment's ping-pong (OSU ``osu_latency``: K
  back-to-back round trips a->b->a per sample, one-way = sample / 2K) at DOCTOR_SMALL_BYTES. A round
  trip crosses both directions, so latency is a property of the pair; without synchronised clocks a
  one-way latency per direction cannot be measured, and the direction of a fault is told by
  bandwidth.
- ``bandwidth``: for every ordered pair a -> b, a window of DOCTOR_WINDOW messages of
  DOCTOR_LARGE_BYTES from a to b and a 1-element acknowledgement (OSU ``osu_bw``); time per message,
  so algbw is the bandwidth of that direction.
- ``bidirectional``: for every pair, both directions at once (OSU ``osu_bibw``), time per message of
  one direction (both move at once; the p2p convention: algbw counts one direction).
- ``ring``: every rank sends DOCTOR_LARGE_BYTES to rank+1 while receiving from rank-1 (isend/irecv):
  every link of the ring loaded at once; each rank's own time says which rank waited.
- ``compute``: the same fixed matmul work on every rank (calibrated once: DOCTOR_COMPUTE_MS to twice that on
  the slowest rank, the same count everywhere), no communication: the rank that is slowest in it,
  significantly more often than chance, is a straggler, and the others wait for it at every collective.
- ``all_reduce`` / ``all_gather`` at DOCTOR_SIZES: the collectives training waits on, with every rank's
  own time.

The pair probes run one pair at a time (the other ranks wait at the harness's barrier), so a link is
measured alone; intra-node and inter-node pairs are told apart by the ranks' hosts.
"""

from __future__ import annotations

import dataclasses

import torch

from suite.api import p2p
from suite.api import collectives as ops
from suite.api import sweep
from suite.api import Buffers, Bytes, Case, Session, Timing, experiment_test
from suite.api import BenchConfig
from suite.api import DistContext, NeedsRanks
from suite.api import autorange

EXPERIMENT = "doctor"

COMPUTE_FEATURES = 128
"""The straggler probe multiplies COMPUTE_FEATURES x COMPUTE_FEATURES float32 matrices (one thread: the
launcher sets OMP_NUM_THREADS=1), K times per sample."""
COMPUTE_MIN_MATMULS = 16
"""At least this many matmuls per sample: a first calibration trial slowed by a hiccup cannot leave a
sample of one or two matmuls (mostly the cost of calling them)."""
COMPUTE_MAX_MATMULS = 100_000
COMPUTE_MAX_OVER_TARGET = 2
"""A calibration trial longer than this many DOCTOR_COMPUTE_MS on the slowest rank shrinks K once (autorange's
``max_sample_s``): a rank under a CPU quota runs the short first trial within one period's grant, at full speed,
and the next, sized from it, throttled; without the shrink its every sample lasts as many times the target as
the quota is below a core."""

COLLECTIVES = ("all_reduce", "all_gather_into_tensor")
"""The collectives whose per-rank times are kept (ops.REGISTRY variants)."""


PASSES = 2
"""The link, ring and compute probes run this many times, one whole pass after the other: a finding must
hold in every pass (a burst of noise hits one pass; a slow link or a starved rank stays)."""


def _doctor(case: Case, probe: str, pass_no: int = 1) -> Case:
    """A p2p/collectives declaration as one of the doctor's probes (``pass_no``: which pass)."""
    suffix = f"-pass{pass_no}" if probe not in ("all_reduce", "all_gather") else ""
    return dataclasses.replace(
        case,
        experiment=EXPERIMENT,
        label=case.label + suffix,
        identity={"probe": probe, "pass": pass_no, **case.identity},
        timing=dataclasses.replace(case.timing, keep_rank_samples=True),
    )


def _compute(ctx: DistContext, k: int) -> Buffers:
    g = torch.Generator().manual_seed(0)
    a = torch.rand(COMPUTE_FEATURES, COMPUTE_FEATURES, generator=g)
    b = torch.rand(COMPUTE_FEATURES, COMPUTE_FEATURES, generator=g)
    out = torch.empty(COMPUTE_FEATURES, COMPUTE_FEATURES)

    def call(async_op: bool):
        for _ in range(k):
            torch.mm(a, b, out=out)

    return Buffers(call=call, fields={"nodes": [ctx.node_of(r) for r in range(ctx.world_size)]})


def _resolve_compute(cfg: BenchConfig):
    def resolve(case: Case, ctx: DistContext, _cfg: BenchConfig, session: Session) -> Case:
        k, trial_s = autorange(
            ctx,
            _compute(ctx, 1).call,
            min_sample_s=cfg.doctor.compute_ms / 1e3,
            min_repeats=COMPUTE_MIN_MATMULS,
            max_repeats=COMPUTE_MAX_MATMULS,
            max_sample_s=COMPUTE_MAX_OVER_TARGET * cfg.doctor.compute_ms / 1e3,
        )
        return dataclasses.replace(
            case,
            build=lambda c, session: _compute(c, k),
            fields={
                **case.fields,
                "matmuls_per_sample": k,
                "calibration_sample_us": trial_s * 1e6,
                "iteration": f"{k} matmuls of {COMPUTE_FEATURES}x{COMPUTE_FEATURES} float32 on every rank, "
                "no communication",
            },
            provenance={
                **case.provenance,
                "matmuls_per_sample": "derived: suite.harness.autorange.autorange: the first trial of K matmuls "
                f"lasting DOCTOR_COMPUTE_MS to {COMPUTE_MAX_OVER_TARGET}x that on the slowest rank (or, after one "
                f"longer trial shrank K, at least DOCTOR_COMPUTE_MS), K >= {COMPUTE_MIN_MATMULS}",
                "calibration_sample_us": "measured: that trial's time, maximum over ranks (host clock)",
            },
        )

    return resolve


def _compute_case(cfg: BenchConfig) -> Case:
    return Case(
        experiment=EXPERIMENT,
        op="compute",
        label=f"compute-mm{COMPUTE_FEATURES}",
        identity={"features": COMPUTE_FEATURES},
        bytes=Bytes(
            size_bytes=0, count=0, dtype="float32", bw_op=None, definition="no data moves: a local computation"
        ),
        build=lambda ctx, session: _compute(ctx, 1),
        unchecked="a local matmul with nothing communicated: there is no transfer to check",
        fields={"compute_ms_target": cfg.doctor.compute_ms},
        timing=Timing(
            mode="blocking", keep_rank_samples=True, normalisation="none: time of the K matmuls of one sample"
        ),
        resolve=_resolve_compute(cfg),
    )


def cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Every probe of the doctor for this world size (identical on all ranks)."""
    doc, n = cfg.doctor, world_size
    if n < 2:
        return [
            _doctor(
                p2p.not_runnable(
                    NeedsRanks(2, f"the doctor compares ranks and links: it needs at least 2 ranks (world size {n})"),
                    experiment=EXPERIMENT,
                ),
                "none",
            )
        ]
    dtype = "float32"
    el = ops.elsize(dtype)
    out: list[Case] = []
    small, large = max(el, doc.small_bytes // el * el), max(el, doc.large_bytes // el * el)
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    for pass_no in range(1, PASSES + 1):
        out += [
            _doctor(c, "latency", pass_no)
            for c in p2p.pair_matrix.pair_latency_cases(pairs, small, dtype, experiment=EXPERIMENT)
        ]
        for variant, links in (
            ("unidirectional", [(a, b) for a in range(n) for b in range(n) if a != b]),
            ("bidirectional", pairs),
        ):
            for a, b in links:
                c = p2p.window.window_case(
                    p2p.pattern.Spec(
                        pattern="window",
                        variant=variant,
                        size_bytes=large,
                        dtype=dtype,
                        src=a,
                        dst=b,
                        window=doc.window,
                    ),
                    experiment=EXPERIMENT,
                )
                out.append(_doctor(c, "bandwidth" if variant == "unidirectional" else "bidirectional", pass_no))
        out.append(_doctor(p2p.ring.ring_case("isend_irecv", large, dtype, experiment=EXPERIMENT), "ring", pass_no))
        out.append(_doctor(_compute_case(cfg), "compute", pass_no))
        if pass_no == 1:
            out += _collective_cases(doc, n, dtype)
    return out


def _collective_cases(doc, n: int, dtype: str) -> list[Case]:
    out = []
    el = ops.elsize(dtype)
    for variant in COLLECTIVES:
        coll = ops.BY_VARIANT[variant]
        for size in doc.collective_bytes:
            count = size // el // (n if coll.chunked else 1) * (n if coll.chunked else 1)
            if count == 0:
                continue
            a = ops.Args(
                variant=variant,
                dtype=dtype,
                redop="sum" if coll.reduces else None,
                size_bytes=count * el,
                count=count,
                in_place=coll.in_place_forms[0],
                root=-1,
            )
            out.append(_doctor(sweep.collective_case(coll, a, experiment=EXPERIMENT), coll.op))
    return out


test_doctor = experiment_test(cases)
