"""Point-to-point patterns: the workloads of the p2p experiment (experiments/p2p/), and the link probes
the doctor (experiments/doctor/) reuses. Latency, bandwidth, the patterns people build with send/recv,
and their pitfalls.

One file per pattern, each filling one ``Pattern`` (pattern.py: its name, variants, byte model, builder,
declaration, ...), all listed in ``PATTERNS``:

- pingpong.py: one-way latency rank 0 <-> each other rank (OSU ``osu_latency``);
- pair_matrix.py: the same ping-pong for every ordered pair: the way to find a slow link;
- window.py: streaming bandwidth, one and both directions (OSU ``osu_bw``/``osu_bibw``);
- ring.py: send to next, receive from previous (nccl-tests ``sendrecv_perf``), three orderings;
- exchange.py: where both-send-first deadlocks (an isolated pair, deadlock.py + deadlock_child.py),
  and the correct orderings at that size;
- producer.py: rank 0 feeds the others: isend to each vs broadcast and vs scatter;
- control.py: a 4-byte signal, a ready/go handshake from p2p, and barrier;
- barrier_cost.py: ring steps with and without a barrier after each;
- batching.py: K small messages one by one, isend, batch_isend_irecv, coalesced.

(The pipeline of micro-batches through stages is the model_parallel experiment's: its stages compute, and
its bubble is compared with the model of the schedule that ran.)

A new pattern is one file filling a ``Pattern`` and one line in the ``PATTERNS`` tuple below: the
declarations (``cases``) and the p2p table (experiments/p2p/table.py) take every pattern from there
(docs/experiments.md, "Adding a p2p pattern").
"""

from __future__ import annotations

from suite.case import Buffers, Bytes, Case, CaseFailed, NeedsRanks
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.ops.collectives import elsize
from suite.ops.p2p import barrier_cost, batching, control, exchange, pair_matrix, pingpong, producer, ring, window
from suite.ops.p2p.pattern import Pattern, Sweep

PATTERNS: dict[str, Pattern] = {
    p.name: p
    for p in (
        pingpong.PATTERN,
        pair_matrix.PATTERN,
        window.PATTERN,
        ring.PATTERN,
        exchange.PATTERN,
        producer.PATTERN,
        control.PATTERN,
        barrier_cost.PATTERN,
        batching.PATTERN,
    )
}
"""Every pattern, in the order of its cases and of its table."""


def not_runnable(reason: str, *, experiment: str) -> Case:
    """One case of ``experiment``, labelled with its name, that says why nothing can run (instead of pytest's
    "got empty parameter set")."""

    def build(ctx: DistContext, session) -> Buffers:
        raise CaseFailed(reason)

    return Case(
        experiment=experiment,
        op="send_recv",
        label=experiment,
        identity={},
        bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None),
        build=build,
        skip=lambda ctx, cfg: reason,
    )


def cases(cfg: BenchConfig, world_size: int, *, experiment: str) -> list[Case]:
    """Every pattern of PATTERNS for the run's sweep and world size (identical on all ranks), as cases of
    ``experiment`` (the one that declares them passes its name)."""
    dtype = cfg.dtypes[0]
    el = elsize(dtype)
    sizes = sorted({s // el * el for s in cfg.sizes() if s >= el})
    if world_size < 2:
        return [
            not_runnable(
                NeedsRanks(2, f"point-to-point needs at least 2 ranks (world size {world_size})"), experiment=experiment
            )
        ]
    if not sizes:
        return [not_runnable(f"no message size of the sweep holds one {dtype} element", experiment=experiment)]
    sw = Sweep(dtype=dtype, sizes=sizes, ends=sorted({sizes[0], sizes[-1]}))
    return [c for p in PATTERNS.values() for c in p.declare(cfg, world_size, sw, experiment)]
