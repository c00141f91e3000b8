"""Where a run's time goes: seconds per phase on this rank, in bench.json and one summary line.

The harness (suite/harness/runner.py) and the timing loop (suite/harness/timing.py) add each phase of each case
(group and probe, building buffers, the check run, checks, warm-up, the timed samples, the
cross-rank reduction, the after-case sequence check); the pytest bridge (suite/harness/pytest/plugin.py and
results_file.py) adds starting the process group and writing bench.json, and the rest of the session's
wall time is ``other`` (pytest's own work, collection, fixtures, reports). Rank 0's are recorded as
``suite.phase_seconds`` (and per experiment ``suite.phase_seconds_by_experiment``); ``docs/reports.md``
shows the breakdown of ``make bench-cpu``. With a ``timeline`` (suite/harness/journal/timeline.py) each phase is also
a span of the run's trace.
"""

from __future__ import annotations

import contextlib
import time

from suite.common import timed_start
from suite.metrics import phase_parts

ORDER = (
    "start",
    "setup",
    "probe",
    "build",
    "check_run",
    "check",
    "warmup",
    "timed",
    "gather",
    "sequence_check",
    "record",
    "write",
    "other",
)
"""Every phase, in the order of a case (``other``: the session's wall time no phase claims)."""

MEANING = {
    "start": "process group started, journal installed, machine info gathered (once per session)",
    "setup": "the case's context (e.g. a new process group), skip, resolve, and the injected-fault hooks",
    "probe": "support probes (one tiny op per op form, cached per group)",
    "build": "buffer sets built: input patterns, outputs, models",
    "check_run": "the untimed ops whose results are checked: the first, and an in-place op's after its reset",
    "check": "comparing outputs with the exact expected results (check run and every timed buffer set)",
    "warmup": "untimed warm-up iterations (and a CUDA graph's capture)",
    "timed": "the timed samples, with their barriers",
    "gather": "samples and wrong-element counts reduced across ranks",
    "sequence_check": "after-case comparison of the ranks' collective counts through the store",
    "record": "derived fields and the record",
    "write": "bench.json rewritten (rank 0, after every case)",
    "other": "the rest of the session: pytest (collection, fixtures, reports), skipped cases' bookkeeping",
}


class Phases:
    """Seconds this rank spent in each phase (a ``with phases("timed"):`` block adds its time)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.experiment: str | None = None
        """The experiment whose case runs now (``of_experiment``): its phases are also added to it."""
        self.by_experiment: dict[str, dict[str, float]] = {}
        self.wall_by_experiment: dict[str, float] = {}
        self.timeline = None
        """This rank's timeline (suite/harness/journal/timeline.py), once the session's journal is installed."""
        self.timed_marked = False
        """Whether this session has left its first-timed-step file (suite/common/timed_start.py): once is enough."""

    def add(self, name: str, seconds: float, *, started: float | None = None) -> None:
        """``seconds`` more in phase ``name``; ``started`` (its ``time.perf_counter`` at the start): also a span
        of the timeline."""
        if name not in MEANING:
            raise ValueError(f"unknown phase {name!r}; known: {', '.join(ORDER)}")
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        if started is not None and self.timeline is not None:
            self.timeline.span("phase", name, started, started + seconds)
        if self.experiment is not None:
            mine = self.by_experiment.setdefault(self.experiment, {})
            mine[name] = mine.get(name, 0.0) + seconds

    @contextlib.contextmanager
    def of_experiment(self, experiment: str):
        """A case of ``experiment`` runs in this block: its wall time and phases count to it too."""
        t0, self.experiment = time.perf_counter(), experiment
        try:
            yield
        finally:
            self.experiment = None
            wall = self.wall_by_experiment.get(experiment, 0.0)
            self.wall_by_experiment[experiment] = wall + time.perf_counter() - t0

    @contextlib.contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        if name == "timed" and not self.timed_marked and self.timeline is not None:  # the injector counts an
            self.timed_marked = True  # onset from the first: no system call at every later round
            timed_start.mark(self.timeline.journal.run_dir, self.timeline.journal.rank)
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0, started=t0)

    def breakdown(self, wall_s: float) -> dict[str, float]:
        """Every phase's seconds (rounded to ms), ``other`` = ``wall_s`` less the phases measured."""
        return _breakdown(self.seconds, wall_s)

    def breakdown_by_experiment(self) -> dict[str, dict[str, float]]:
        """Per experiment: its cases' seconds per phase, ``other`` = their wall time less those phases
        (the session's start, collection and reports belong to no experiment)."""
        return {e: _breakdown(self.by_experiment.get(e, {}), w) for e, w in self.wall_by_experiment.items()}


def _breakdown(seconds: dict[str, float], wall_s: float) -> dict[str, float]:
    out = {k: round(seconds[k], 3) for k in ORDER if k in seconds}
    out["other"] = round(max(0.0, wall_s - sum(seconds.values())), 3)
    return out


def summary_line(breakdown: dict[str, float]) -> str:
    """``time by phase (rank 0): timed 94.1 s (23%), ...``, largest first."""
    return f"time by phase (rank 0, {sum(breakdown.values()) or 1.0:z.0f} s): " + phase_parts(breakdown)
