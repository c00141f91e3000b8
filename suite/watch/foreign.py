"""CPU taken on a rank's host by processes outside the run: the watch's evidence that a rank it names slow shares its
cores with a neighbour (a job beside the run), which step times alone cannot tell from a fault of the run's own.

On shared cores a neighbour does not slow every rank alike at every moment: for a second or more it sits on one rank's
core and not on its peer's, then it moves. That rank is then genuinely slower than its past and its peers, and on the
shared 2-core development machine the change-point detector (detect.py) named such a rank in 1 or 2 of 20 clean smoke
trials at loads of 5 to 10 (tests/e2e/test_failslow_bench.py). What tells it apart is not in the rank's times but on its
host: how much of the host's CPU went to processes that are not the run's.

At each exchange every rank reads (``sample``) its kernel's CPU counters (``/proc/stat`` through psutil: busy and
total time, all cores; steal counts as busy: a hypervisor's other guests are neighbours too), its own process's CPU
time (all its threads), and its kernel's boot id, which ranks on one kernel share (local ranks, and the compose
simulation's nodes: containers share their host's kernel and its counters). Rank 0 groups the ranks by kernel
(``shares``): over the interval since the last exchange, the CPU outside the run on a kernel is its busy time less
the time of the run's ranks on it, as a share of the kernel's total (every core's time). A rank's own child
processes (data-loader workers) and the launcher's count as outside the run: a rank process's CPU is what it
reads. An injector's processes (a ``noisy`` neighbour's, the controller's) are outside the run too: the watch does
not know what was injected, and a neighbour the bench injects is measured as any other.

A flag raised while the CPU outside the run on its rank's host averaged ``FOREIGN_PCT`` or more since its onset is
classed ``foreign load``: still reported (the rank is slower), with that share as its evidence. The class says the
host was busy, so a neighbour may be the cause; it does not clear the rank (a host busy throughout classes every
flag so, an injected rank's too).
"""

from __future__ import annotations

from collections.abc import Sequence

from suite.system import cpu_load

FOREIGN_PCT = 25.0
"""The share of the host's CPU (every core's time) that processes outside the run must have used, on the mean since
a flag's onset, for the flag to be classed ``foreign load``: on a 2-core host half a core, the least load that
leaves some rank of two a core to share."""
FIELDS = 5
"""A sample's numbers: kernel id, busy s, total s, the process's own CPU s, and a spare 0 (one row of the exchange)."""


def sample() -> tuple[float, float, float, float, float]:
    """(kernel id, the kernel's busy CPU s, its total CPU s, this process's CPU s, 0): suite/system/cpu_load.py."""
    return (*cpu_load.cpu_counters(), 0.0)


def shares(before: Sequence[Sequence[float]], now: Sequence[Sequence[float]]) -> list[float | None]:
    """Per rank (its position), the percentage of its kernel's CPU that processes outside the run used between two
    samples of every rank (``before``, ``now``); None where the kernel's counters did not move."""
    kernels: dict[float, list[int]] = {}
    for k, s in enumerate(now):
        kernels.setdefault(s[0], []).append(k)
    out: list[float | None] = [None] * len(now)
    for ranks in kernels.values():
        first = ranks[0]  # the kernel's counters, as its first rank read them
        busy = now[first][1] - before[first][1]
        total = now[first][2] - before[first][2]
        run = sum(max(0.0, now[k][3] - before[k][3]) for k in ranks)
        share = None if total <= 0 else round(100 * min(1.0, max(0.0, busy - run) / total), 1)
        for k in ranks:
            out[k] = share
    return out


def classed(pct: float | None) -> str:
    """A flag's class from the CPU outside the run on its host since its onset (percent, None: not measured)."""
    return "foreign load" if pct is not None and pct >= FOREIGN_PCT else "slowdown"


def evidence(pct: float | None) -> str:
    """A flag's evidence's tail: the CPU outside the run on its host since its onset (nothing where not measured)."""
    return "" if pct is None else f"; processes outside the run used {pct:z.0f}% of its host's CPU since the onset"


class Host:
    """Rank 0's account of the CPU outside the run, one exchange at a time (``add``: every rank's ``sample``)."""

    def __init__(self, ranks: int) -> None:
        self.samples: list[list[float]] | None = None  # every rank's counters at the last exchange
        self.now: list[float | None] = [None] * ranks  # since the last exchange, per rank's host (%)
        self.seen: list[float] = []  # per exchange: its largest over the hosts

    def add(self, samples: list[list[float]]) -> None:
        if self.samples is not None:
            self.now = shares(self.samples, samples)
            self.seen += [max(x for x in self.now if x is not None)] if any(x is not None for x in self.now) else []
        self.samples = samples

    def fields(self) -> dict:
        """The record's: the mean and the largest over the exchanges (nothing where never measured)."""
        if not self.seen:
            return {}
        return {
            "watch_foreign_cpu_pct": round(sum(self.seen) / len(self.seen), 1),
            "watch_foreign_cpu_pct_max": max(self.seen),
        }
