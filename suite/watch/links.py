"""A node's egress or one link turned slow: what the change-point detector (detect.py) cannot name, since every rank's
step slows alike (a DDP step's all-reduce waits on the slowest link on every rank) and no rank stands out from its
peers.

``Pace`` follows the job's step, the median over every rank's steps of each exchange, which every rank computes
alike from the same gathered rows: once the last ``SLOW_EXCHANGES`` exchanges' steps are each ``SLOWER`` times the
job's own past (the median of its first exchanges but the very first, which is warm-up) and the job has more than one
node, every rank decides, alike, to probe (at most once per ``AGAIN`` exchanges). ``probe`` times each ordered pair
of node leaders (each node's first rank): ``BYTES`` one way and one element back, ``REPS`` times, the sender's clock,
every rank then summing the table (one all_reduce). ``named`` reads it on rank 0: a node whose every outgoing link's
best time is ``LINK_X`` times the median of the other links' and ``GAP_S`` longer is named (its egress), else one such
link; a loaded host slows every link alike and names none.

Measured on the compose simulation, two nodes of one rank: an egress cut to 50 Mbit/s slowed the DDP step 23x and
no rank stood out (the change-point detector flagged nothing).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping

import torch
import torch.distributed as dist

from suite.watch import detect

SLOWER = 1.5
"""The job's step, at the last exchanges, over its own past: a probe's trigger."""
SLOW_EXCHANGES = 2
"""Consecutive exchanges that slow."""
PAST = 3
"""Exchanges (after the first) whose steps are the job's past."""
AGAIN = 10
"""Exchanges between two probes that named nothing."""
BYTES = 256 << 10
"""Each probe message (float32 elements): ~5 ms at 400 Mbit/s, 42 ms at 50."""
REPS = 3
"""Messages per ordered pair: the best (least) time counts."""
LINK_X = 2.0
GAP_S = 1e-3
"""A link is slow at ``LINK_X`` times the median of the other links' best times and ``GAP_S`` more (a loaded host's
jitter of a sub-millisecond message is not a slow link)."""


class Pace:
    """The job's step per exchange, the same on every rank: ``due`` says when every rank probes."""

    def __init__(self) -> None:
        self.steps: list[float] = []
        self.probed_at: int | None = None  # the exchange of the last probe
        self.done = False  # a probe named something: no more

    def due(self, step_s: float, nodes: int) -> bool:
        """This exchange's median step (s) in; whether every rank probes now."""
        self.steps.append(step_s)
        n = len(self.steps)
        if self.done or nodes < 2 or n < 1 + PAST + SLOW_EXCHANGES:
            return False
        if self.probed_at is not None and n - self.probed_at < AGAIN:
            return False
        past = statistics.median(self.steps[1 : 1 + PAST])
        if all(s >= SLOWER * past for s in self.steps[-SLOW_EXCHANGES:]):
            self.probed_at = n
            return True
        return False

    def ratio(self) -> float:
        """The last exchange's step over the job's past."""
        return self.steps[-1] / statistics.median(self.steps[1 : 1 + PAST])


def pairs(nodes: Mapping[str, tuple[int, ...]]) -> list[tuple[str, str]]:
    """Every ordered pair of nodes (by name), in one order on every rank."""
    names = sorted(nodes)
    return [(a, b) for a in names for b in names if a != b]


def probe(nodes: Mapping[str, tuple[int, ...]], rank: int, group) -> dict[tuple[str, str], list[float]]:
    """Every rank: each ordered pair's ``REPS`` times (s) of ``BYTES`` from the sender's leader to the receiver's
    and one element back, on the sender's clock; the table summed over the ranks (every rank holds it)."""
    order = pairs(nodes)
    times = torch.zeros(len(order) * REPS, dtype=torch.float64)
    data, ack = torch.zeros(BYTES // 4), torch.zeros(1)
    for i, (a, b) in enumerate(order):
        src, dst = nodes[a][0], nodes[b][0]
        for k in range(REPS):
            if rank == src:
                t = time.perf_counter()
                dist.send(data, dst, group=group)
                dist.recv(ack, dst, group=group)
                times[i * REPS + k] = time.perf_counter() - t
            elif rank == dst:
                dist.recv(data, src, group=group)
                dist.send(ack, src, group=group)
    dist.all_reduce(times, group=group)
    return {p: times[i * REPS : (i + 1) * REPS].tolist() for i, p in enumerate(order)}


def _slow(t: float, others: list[float]) -> bool:
    base = statistics.median(others)
    return t >= LINK_X * base and t - base >= GAP_S


def named(table: Mapping[tuple[str, str], list[float]]) -> tuple[str, str, float] | None:
    """What a probe's table names: (``node``, its name, its slowest outgoing link's ratio) where every link out of
    one node is slow against the others, else (``link``, ``a->b``, ratio) for the slowest slow link; None."""
    best = {p: min(ts) for p, ts in table.items()}
    if len(best) < 2:
        return None
    for node in sorted({a for a, _ in best}):
        out = [t for (a, _), t in best.items() if a == node]
        rest = [t for (a, _), t in best.items() if a != node]
        if all(_slow(t, rest) for t in out):
            return "node", node, min(out) / statistics.median(rest)
    (a, b), t = max(best.items(), key=lambda kv: kv[1])
    rest = [x for p, x in best.items() if p != (a, b)]
    return ("link", f"{a}->{b}", t / statistics.median(rest)) if _slow(t, rest) else None


def evidence(table: Mapping[tuple[str, str], list[float]], job_ratio: float) -> str:
    """The flag's words: the job's step against its past, each link's best time."""
    links = ", ".join(f"{a}->{b} {1e3 * min(ts):z.2f} ms" for (a, b), ts in table.items())
    return (
        f"the job's step {job_ratio:z.1f}x its own past with no rank standing out; a probe of {BYTES >> 10} KiB "
        f"each way between the nodes' first ranks, best of {REPS}: {links}"
    )


def flag(
    table: Mapping[tuple[str, str], list[float]],
    hit: tuple[str, str, float],
    nodes: Mapping[str, tuple[int, ...]],
    points: tuple[int, int],
    job_ratio: float,
) -> detect.Flag:
    """The flag of what ``named`` found, over the detector's points (onset, detected): its ranks (a link's: both
    ends' leaders), the rank-sum p of its messages' times against the other links'."""
    kind, name, ratio = hit
    mine = (lambda a, b: a == name) if kind == "node" else (lambda a, b: f"{a}->{b}" == name)
    slow = [t for (a, b), ts in table.items() for t in ts if mine(a, b)]
    rest = [t for (a, b), ts in table.items() for t in ts if not mine(a, b)]
    ranks = nodes[name] if kind == "node" else tuple(nodes[n][0] for n in name.split("->"))
    onset, last = points
    return detect.Flag(
        kind=kind,
        target=name if kind == "node" else f"link {name}",
        ranks=tuple(ranks),
        metric="egress" if kind == "node" else "transfer",
        onset=onset,
        detected=last,
        ratio=ratio,
        own_ratio=job_ratio,
        p=detect.rank_sum_p(rest, slow),
        after=last + 1 - onset,
        test="probe",
        note=evidence(table, job_ratio),
    )
