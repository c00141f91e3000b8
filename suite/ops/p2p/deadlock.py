"""The deadlock demonstration: an isolated pair of processes that both call blocking ``send`` first.

Two child processes (``python -m suite.ops.p2p.deadlock_child --deadlock-child ...``), with their own
store on a loopback port, first run the correct orderings (``ORDERINGS``: parity,
``isend``/``irecv``, ``batch_isend_irecv``) at the largest probe size, then the naive
one (both ranks send first) at ascending sizes. Each step has a bound T scaled to its
expected transfer time (``DeadlockProbe.bound_s``: size / the rate the pair showed, with a
floor). "No progress within T" is reported as that, not as a hang: a step that completes
later, within ``blocked_factor`` x T, was *slow* (e.g. a delayed peer); one that never
makes progress within that bound is *blocked*, and the pair is killed there. The first
naive size that blocks is where the backend blocks. ``run_deadlock_probe`` never blocks
its caller for more than ``total_limit_s`` (+ kill time).

The p2p experiment (suite/ops/p2p/pattern.py, pattern ``exchange``) runs the probe once per
session on rank 0 and times the correct orderings in the suite's own group at the size
where the naive one blocked. This module imports neither pytest nor the harness.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from suite.ops.algorithms import ORDERINGS
from suite.harness.dist import free_port

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True, kw_only=True)
class DeadlockProbe:
    """Bounds of the isolated both-send-first demonstration.

    A step (one exchange of ``size`` bytes each way) is due within its bound
    ``T = max(floor_s, slack x size / rate)``: the expected transfer time at the rate the pair
    showed (or ``assumed_rate_bytes_per_s`` before it has shown one), with a floor for process
    scheduling. A step that has made no progress within T is *late*; one that then completes
    within ``blocked_factor x T`` was **slow**, one that does not is **blocked** (never made
    progress within that bound), and the pair is killed there.
    """

    sizes: tuple[int, ...] = tuple(4 << (2 * i) for i in range(12))
    """Probe sizes, bytes, ascending: 4 B .. 16 MiB (x4)."""
    floor_s: float = 1.0
    """No step is late before this long, however small (a loaded host's scheduling)."""
    slack: float = 10.0
    """A step is late when it takes more than ``slack`` x its expected transfer time."""
    assumed_rate_bytes_per_s: float = 50e6
    """The rate the bound assumes before one is measured (a slow loopback); the correct orderings,
    run first at the largest size, then measure it (each process times its own exchange)."""
    blocked_factor: float = 3.0
    """A late step that still shows no progress after this many times its bound is blocked."""
    start_limit_s: float = 30.0
    """Time allowed for the pair to start (import torch, rendezvous) on a loaded host."""
    total_limit_s: float = 45.0
    """Hard cap on the whole probe, start included."""
    delay_step: str | None = None
    """Fault injection (tests, demonstrations): before this step (an ordering or ``naive``) process 1
    sleeps ``delay_s``, as a delayed peer would: a slow step, not a blocked one."""
    delay_s: float = 0.0

    def bound_s(self, size: int, rate_bytes_per_s: float) -> float:
        """T for a step moving ``size`` bytes each way, at ``rate_bytes_per_s``."""
        return max(self.floor_s, self.slack * size / rate_bytes_per_s)


PROBE = DeadlockProbe()


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """What the isolated both-send-first pair showed."""

    backend: str
    device: str
    sizes_probed: tuple[int, ...]
    """Sizes the naive ordering was tried at, ascending, bytes (the last one blocked, if any did)."""
    completed_bytes: tuple[int, ...]
    """Sizes at which both-send-first completed (the backend buffered the message), on time or slow."""
    blocked_from_bytes: int | None
    """Smallest probed size at which both-send-first never made progress within its blocked bound;
    None: none blocked."""
    no_progress_within_s: float | None
    """The blocked step's bound T: it made no progress within T (nor within blocked_factor x T)."""
    no_progress_for_s: float | None
    """Seconds the blocked step was watched without progress before the pair was killed
    (>= blocked_factor x no_progress_within_s)."""
    steps: tuple[dict, ...]
    """Every step watched, in order: ``step``, ``bytes``, ``bound_s`` (T), ``outcome`` (on_time: within
    T; slow: progress only after T, within the blocked bound; blocked: none within it), ``took_s``
    (blocked: the time watched)."""
    slow_steps: tuple[str, ...]
    """``<step>@<bytes>`` of the steps that were slow (completed after their bound T)."""
    rate_bytes_per_s: float
    """The rate the naive steps' bounds used."""
    rate_source: str
    """How that rate was obtained (measured from the correct orderings, or the configured assumption)."""
    floor_s: float
    slack: float
    blocked_factor: float
    probe_sizes: tuple[int, ...]
    """Every size the naive ordering would have been tried at (DeadlockProbe.sizes)."""
    start_limit_s: float
    total_limit_s: float
    correct_orderings: dict
    """Ordering -> 'completed' / 'slow' / 'blocked' / 'not run', at ``correct_orderings_bytes``."""
    correct_orderings_bytes: int
    n_wrong: int
    """Wrong elements the pair counted in every exchange that completed."""
    elapsed_s: float
    """Wall time of the whole probe, start-up included."""
    killed: bool
    """Whether the pair had to be killed (a step blocked)."""
    error: str | None = None
    naive_ordering: str = "both ranks: blocking send to the other, then recv"


PROVENANCE = {
    "deadlock_blocked_from_bytes": "measured: the smallest probed size at which both-send-first made no progress "
    "within its bound in the isolated pair (null: none blocked)",
    "deadlock_completed_bytes": "measured: the probed sizes at which both-send-first completed in the isolated pair",
    "deadlock_sizes_probed": "measured: the sizes both-send-first was tried at, up to the first that blocked",
    "deadlock_no_progress_within_s": "derived: the blocked step's bound T = max(floor_s, slack x size / "
    "rate_bytes_per_s) (DeadlockProbe.bound_s)",
    "deadlock_no_progress_for_s": "measured: seconds the blocked step was watched without progress before "
    "the pair was killed (monotonic clock of the watching process)",
    "deadlock_rate_bytes_per_s": "measured: the rate the bounds used, as deadlock_rate_source says (the configured "
    "assumed_rate_bytes_per_s until a correct ordering had completed)",
    "deadlock_correct_orderings_bytes": "derived: the probe's largest size (DeadlockProbe.sizes[-1]), where "
    "the correct orderings ran in the pair",
    "deadlock_n_wrong": "measured: wrong elements the pair counted in every exchange that completed",
    "deadlock_elapsed_s": "measured: wall time of the whole isolated probe, the pair's start-up included "
    "(monotonic clock of rank 0)",
}
"""How each number of a ProbeResult was obtained, under the record's ``deadlock_`` names (the p2p
exchange case records them)."""


_LAUNCHER_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ROLE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_PROCID",
    "SLURM_NTASKS",
)
TAG = "P2P-PROBE"
"""What starts each line the pair reports on (suite/ops/p2p/deadlock_child.py)."""


def _child_env() -> dict:
    # The pair must not join the suite's rendezvous: drop torchrun's variables (with
    # TORCHELASTIC_USE_AGENT_STORE set, c10d would connect to the agent's store).
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_VARS and not k.startswith("TORCHELASTIC")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_deadlock_probe(backend: str = "gloo", device: str = "cpu", probe: DeadlockProbe = PROBE) -> ProbeResult:
    """Start two processes that both call blocking ``send`` first; find where they block.

    The pair first runs the correct orderings at the largest probe size, then the
    naive one at ascending sizes. Each step is due within its bound T; a step late
    past T but done within ``blocked_factor`` x T is recorded as slow, the first
    that shows no progress within that is blocked, and both processes are killed.
    Never blocks the caller for more than ``total_limit_s`` (+ kill time).
    A pair that dies before it is up (the free port was taken meanwhile) is started
    once more, within the same cap.
    """
    start = time.monotonic()
    res = _probe_once(backend, device, probe, start)
    if res.error and res.error.startswith(_START_FAILED) and time.monotonic() - start < probe.total_limit_s / 2:
        res = _probe_once(backend, device, probe, start)
    return res


_START_FAILED = "the probe pair did not come up"


def _probe_once(backend: str, device: str, probe: DeadlockProbe, start: float) -> ProbeResult:
    """Start the pair, watch it step by step (``_Watch``), end it, and say what it showed."""
    procs = _start_pair(backend, device, probe)
    events: queue.Queue = queue.Queue()
    tails: list[list[str]] = [[], []]

    def reader(r: int, stream) -> None:
        for line in stream:
            line = line.strip()
            if line.startswith(TAG):
                events.put((r, line[len(TAG) :].split()))
            elif line:
                tails[r] = (tails[r] + [line])[-5:]
        events.put((r, ["eof"]))

    threads = [threading.Thread(target=reader, args=(r, p.stdout), daemon=True) for r, p in enumerate(procs)]
    for t in threads:
        t.start()
    watch = _Watch(probe, start)
    watch.run(events, procs, tails)
    killed = _end_pair(procs, threads)
    return watch.result(backend, device, killed)


def _start_pair(backend: str, device: str, probe: DeadlockProbe) -> list[subprocess.Popen]:
    """The two processes of the pair (suite/ops/p2p/deadlock_child.py), on a free loopback port."""
    port = free_port()
    sizes_arg = ",".join(str(s) for s in probe.sizes)
    # The pair's own group timeout outlives our bound, so a hang is ours to detect, and
    # ends an orphaned pair on its own if this process dies.
    pg_timeout = probe.total_limit_s + 15
    delay = f"{probe.delay_step}:{probe.delay_s}" if probe.delay_step else "-"
    args = [backend, device, str(probe.sizes[-1]), sizes_arg, str(pg_timeout), delay]
    return [
        subprocess.Popen(
            [sys.executable, "-m", "suite.ops.p2p.deadlock_child", "--deadlock-child", str(r), str(port), *args],
            cwd=ROOT,
            env=_child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in (0, 1)
    ]


def _end_pair(procs: list[subprocess.Popen], threads: list[threading.Thread]) -> bool:
    """Kill what still runs of the pair (our own children, by handle), reap it; whether any had to be killed."""
    killed = False
    for p in procs:
        if p.poll() is None:
            p.kill()
            killed = True
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    for t in threads:
        t.join(timeout=2)
    return killed


class _Watch:
    """The watcher's view of the pair: the steps both processes must report, in order (``ready``, the correct
    orderings at the largest size, the naive one at ascending sizes, ``done``), each within its bound; what
    each step took and how it ended (``log``); the rate the bounds use once a correct ordering has shown one."""

    def __init__(self, probe: DeadlockProbe, start: float) -> None:
        self.probe, self.start, self.big = probe, start, probe.sizes[-1]
        self.steps = [("ready", 0)] + [(o, self.big) for o in ORDERINGS] + [("naive", s) for s in probe.sizes]
        self.steps.append(("done", 0))
        self.seen: dict = {}
        self.took: dict = {}  # (step, size) -> the slower process's own exchange time, s
        self.log: list[dict] = []
        self.step, self.n_wrong, self.error = 0, 0, None
        self.blocked_step: int | None = None
        self.watched_s: float | None = None
        self.rate = probe.assumed_rate_bytes_per_s
        self.rate_source = "configured: DeadlockProbe.assumed_rate_bytes_per_s"

    def run(self, events: queue.Queue, procs: list[subprocess.Popen], tails: list[list[str]]) -> None:
        """Take the pair's reports until every step is done, one blocks, a process ends early or the cap passes."""
        probe, steps = self.probe, self.steps
        step_start = time.monotonic()
        while self.step < len(steps):
            now = time.monotonic()
            bound = probe.start_limit_s if self.step == 0 else probe.bound_s(steps[self.step][1], self.rate)
            limit = bound if self.step == 0 else bound * probe.blocked_factor
            if now - self.start > probe.total_limit_s:
                self.error = f"probe exceeded its {probe.total_limit_s:z.0f} s cap"
                self.blocked_step = self.step if self.step > 0 else None
                return
            try:
                r, words = events.get(timeout=max(0.05, min(0.25, limit - (now - step_start))))
            except queue.Empty:
                if self._late(time.monotonic() - step_start, bound, limit):
                    return
                continue
            if words == ["eof"]:
                if r in self.seen.get(("done", 0), ()):
                    continue  # finished normally; the other one may still be reporting
                start_failed = f"{_START_FAILED}: " if self.step == 0 else ""
                self.error = (
                    f"{start_failed}probe process {r} exited early (status {procs[r].poll()}): "
                    + " | ".join(tails[r])[-400:]
                )
                return
            self._note(r, words)
            if self._advance(bound, step_start):
                step_start = time.monotonic()

    def _late(self, waited: float, bound: float, limit: float) -> bool:
        """Whether the current step, ``waited`` s in, is past its limit: the pair did not start, or the step is
        blocked (logged as such)."""
        if waited < limit:
            return False
        if self.step == 0:
            self.error = f"the probe pair did not start within {limit:z.0f} s"
            return True
        self.blocked_step, self.watched_s = self.step, waited
        name, size = self.steps[self.step]
        self.log.append({"step": name, "bytes": size, "bound_s": bound, "outcome": "blocked", "took_s": waited})
        return True

    def _note(self, r: int, words: list[str]) -> None:
        """A report of process ``r``: ``<step> <bytes> [<wrong elements> [<its exchange time, s>]]``."""
        name, size = words[0], int(words[1]) if len(words) > 1 else 0
        self.n_wrong += int(words[2]) if len(words) > 2 else 0
        if len(words) > 3:
            self.took[(name, size)] = max(self.took.get((name, size), 0.0), float(words[3]))
        self.seen.setdefault((name, size), set()).add(r)

    def _advance(self, bound: float, step_start: float) -> bool:
        """Past every step both processes have now reported (logged on time or slow against ``bound``, each
        next step's bound from the rate so far); whether any was."""
        steps, advanced = self.steps, False
        while self.step < len(steps) and self.seen.get(steps[self.step]) == {0, 1}:
            elapsed = time.monotonic() - step_start
            if 0 < self.step < len(steps) - 1:
                name, size = steps[self.step]
                outcome = "slow" if elapsed > bound else "on_time"
                self.log.append({"step": name, "bytes": size, "bound_s": bound, "outcome": outcome, "took_s": elapsed})
            self.step += 1
            step_start, advanced = time.monotonic(), True
            if steps[self.step - 1][0] in ORDERINGS:
                self._measure_rate()
            if self.step < len(steps):
                bound = self.probe.bound_s(steps[self.step][1], self.rate)
        return advanced

    def _measure_rate(self) -> None:
        big = self.big
        fastest = min((self.took[(o, big)] for o in ORDERINGS if self.took.get((o, big), 0) > 0), default=None)
        if fastest is not None:
            self.rate = big / fastest
            self.rate_source = (
                f"measured: {big} B / the fastest correct ordering's exchange time "
                f"in the pair ({fastest * 1e3:z.2f} ms, the slower process)"
            )

    def result(self, backend: str, device: str, killed: bool) -> ProbeResult:
        """What the pair showed (ProbeResult), from what was watched."""
        probe, big, log, error = self.probe, self.big, self.log, self.error
        done = {s for s in probe.sizes if self.seen.get(("naive", s)) == {0, 1}}
        stuck = self.steps[self.blocked_step] if self.blocked_step is not None else None
        outcome = {(e["step"], e["bytes"]): e["outcome"] for e in log}
        orderings = {}
        for o in ORDERINGS:
            got = outcome.get((o, big))
            orderings[o] = {"on_time": "completed", None: "not run"}.get(got, got)
        blocked = stuck[1] if stuck is not None and stuck[0] == "naive" else None
        if stuck is not None and stuck[0] != "naive" and error is None:
            error = (
                f"correct ordering {stuck[0]} made no progress within {probe.blocked_factor:zg} x "
                f"{log[-1]['bound_s']:z.1f} s"
                if log
                else f"step {stuck[0]} blocked"
            )
        return ProbeResult(
            backend=backend,
            device=device,
            sizes_probed=tuple(s for s in probe.sizes if s in done or stuck == ("naive", s)),
            completed_bytes=tuple(sorted(done)),
            blocked_from_bytes=blocked,
            no_progress_within_s=log[-1]["bound_s"] if blocked is not None else None,
            no_progress_for_s=self.watched_s if blocked is not None else None,
            steps=tuple(log),
            slow_steps=tuple(f"{e['step']}@{e['bytes']}" for e in log if e["outcome"] == "slow"),
            rate_bytes_per_s=self.rate,
            rate_source=self.rate_source,
            floor_s=probe.floor_s,
            slack=probe.slack,
            blocked_factor=probe.blocked_factor,
            probe_sizes=probe.sizes,
            start_limit_s=probe.start_limit_s,
            total_limit_s=probe.total_limit_s,
            correct_orderings=orderings,
            correct_orderings_bytes=big,
            n_wrong=self.n_wrong,
            elapsed_s=time.monotonic() - self.start,
            killed=killed,
            error=error,
        )
