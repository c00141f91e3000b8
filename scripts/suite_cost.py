"""The suite's own cost per op, where no network's noise can hide it: one process, one rank, three backends.

    python scripts/suite_cost.py [--backends null,gloo,mpi] [--sizes 1024,65536,1048576] [--iters 400] [--rounds 10]
                                 [--gap-us 0]

Per backend a process of its own (one process group per process) starts a one-rank group: ``null`` (a group whose
ops complete at once, suite/harness/null_backend.py), ``gloo``, ``mpi`` (the suite's MPI group, MPI's singleton
world). In it the journal is installed as in a run (with its ring file) and the suite's harness
(suite/harness/runner.py) runs the collectives experiment's case all_reduce, sum, float32, in place, blocking,
``--iters`` samples and no sample budget, interleaved round by round with the bare loop (scripts/bare_loop.py) on
torch's own functions, in alternating order; with ``--gap-us N`` the bare loop busy-waits N microseconds before
each sample's barrier (``bare_loop.spin``), where the suite does its own work between samples, so what that much
work there costs a backend's next op shows without the suite's code. Per size it prints:

- the bare loop's op time (its median over rounds of each round's median sample), which the budget is set against;
- the suite's added wall time per op: the mean over rounds of (suite's median - bare median), with its 95% interval
  (Student's t over rounds); the median over rounds of the same differences with its distribution-free 95%
  interval (the sign test's), which a few rounds a burst of load fell in do not move; and whether the added time is
  within the budget, max(1% of the op's time, 0.5 us), read from the median: its whole interval, the median only
  (more rounds would tell), or not;
- the added CPU time per op: ``time.thread_time`` over the suite's timed phase (its barriers and the journal's
  per-sample work outside the samples included) less the bare loop's (its barriers included), per sample;
- where the suite's per-sample work goes, each piece timed alone (CPU): the journal's wrapper per op (what it
  would add were it inside the samples), the journal's record and check of a block of samples per sample (outside
  them: before the block, after it, and a store between two samples), the arrival's
  clock read, the timeline's sample span, one phase block, the case's own call over a bare ``all_reduce(x)``
  (the experiment's closure, which names the reduce op and the group); and the structural probe: journal entries put
  between a sample's start and end (0: none of the journal's work is timed).

A benchmark, not a test: the load average before and after is printed. Exit status 0; 2 on bad arguments; 1 if a
backend's process fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import rounds_ci  # noqa: E402  (scripts/rounds_ci.py)
from suite.system import cpuidle  # noqa: E402  (torch-free)

BACKENDS = ("null", "gloo", "mpi")
BUDGET_FLOOR_US = 0.5
BUDGET_SHARE = 0.01


def budget_us(op_us: float) -> float:
    """The suite's allowance per op: 1% of the op's time, or 0.5 us where that is less."""
    return max(BUDGET_SHARE * op_us, BUDGET_FLOOR_US)


def _start(backend: str, tmp: str):
    """This process's one-rank group on ``backend``, the journal installed as a run installs it; (ctx, journal)."""
    import torch
    import torch.distributed as dist

    from suite.common.config import BenchConfig
    from suite.harness import journal, null_backend
    from suite.harness.dist import DistContext, init_distributed

    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        os.environ.pop(k, None)
    if backend == "null":
        null_backend.start()
        ctx = DistContext(
            rank=0, world_size=1, local_rank=0, local_world_size=1, backend="null", device=torch.device("cpu"),
            group=dist.group.WORLD, timeout_s=60.0, hostnames=["here"],
        )  # fmt: skip
    else:
        ctx = init_distributed(BenchConfig(backend=backend), heartbeat_timeout_s=0)
    return ctx, journal.install(0, tmp)


def _cpu_phases():
    """The run's Phases, also adding the thread's CPU seconds of each ``timed`` block (``timed_cpu``)."""
    import contextlib

    from suite.harness.phases import Phases

    class CpuPhases(Phases):
        timed_cpu = 0.0

        @contextlib.contextmanager
        def __call__(self, name: str):
            c0 = time.thread_time()
            with super().__call__(name):
                yield
            if name == "timed":
                self.timed_cpu += time.thread_time() - c0

    return CpuPhases()


def _cases(cfg, sizes: list[int]) -> dict:
    from suite.ops import sweep

    return {
        c.bytes.size_bytes: c
        for c in sweep.collective_cases(cfg, 1, experiment="collectives")
        if c.op == "all_reduce" and c.identity.get("in_place") and c.bytes.size_bytes in sizes
    }


def child(backend: str, sizes: list[int], iters: int, rounds: int, warmup: int, gap: float = 0.0) -> dict:
    """One backend's rounds, in this process: per size each round's bare and suite medians and CPU per op."""
    import torch.distributed as dist

    import bare_loop
    from suite.common.config import BenchConfig
    from suite.harness.runner import Harness

    barrier, all_reduce = dist.barrier, dist.all_reduce  # torch's own: before the journal wraps them
    with tempfile.TemporaryDirectory() as tmp:
        ctx, j = _start(backend, tmp)
        cfg = BenchConfig(
            backend=backend, min_bytes=min(sizes), max_bytes=max(sizes), step_factor=4.0, dtypes=("float32",),
            redops=("sum",), iters=iters, warmup_iters=warmup, budget_s=0.0, heartbeat_timeout_s=0,
        )  # fmt: skip
        phases = _cpu_phases()
        phases.timeline = j.timeline
        h = Harness(ctx, cfg, env={}, phases=phases)
        cases = _cases(cfg, sizes)
        inside = _probe(j)
        out = {s: {"bare": [], "suite": [], "bare_cpu": [], "suite_cpu": []} for s in sizes}
        for r in range(rounds):
            for s in sizes:
                for side in ("bare", "suite") if r % 2 == 0 else ("suite", "bare"):
                    if side == "bare":
                        bare_loop.samples(s, 0, warmup, barrier, all_reduce)
                        c0 = time.thread_time()
                        got = bare_loop.samples(s, iters, 0, barrier, all_reduce, gap)
                        out[s]["bare_cpu"].append((time.thread_time() - c0) / iters)
                    else:
                        j.set_case(cases[s].label)
                        before = phases.timed_cpu
                        got = h.run(cases[s])[0].samples_s
                        out[s]["suite_cpu"].append((phases.timed_cpu - before) / len(got))
                    out[s][side].append(statistics.median(got))
        parts = _parts(j, phases, barrier, all_reduce)
        parts["call_over_bare_op"] = _call_cost(ctx, h, cases[min(sizes)], all_reduce, j)
        parts["journal_writes_in_samples"] = inside()
    dist.destroy_process_group()
    return {"sizes": out, "parts": parts}


def _probe(j):
    """Count the journal's entries put inside a timed sample (between its start and end on the host clock); a
    function giving the count so far."""
    import bisect

    samples, puts, mark, put, clock = [], [], j.timeline.sample, j.put, time.perf_counter

    def sample(start: float, end: float) -> None:
        samples.append((start, end))
        mark(start, end)

    def counted(*args):
        puts.append(clock())
        return put(*args)

    j.timeline.sample, j.put = sample, counted

    def inside() -> int:
        starts = [a for a, _ in samples]
        return sum(1 for t in puts if (i := bisect.bisect(starts, t) - 1) >= 0 and t < samples[i][1])

    return inside


def _per_call_us(fn, calls: int = 5000) -> float:
    """CPU microseconds of one call of ``fn`` (the median of 5 rounds of ``calls``)."""
    rounds = []
    for _ in range(5):
        c0 = time.thread_time()
        for _ in range(calls):
            fn()
        rounds.append((time.thread_time() - c0) / calls * 1e6)
    return statistics.median(rounds)


def added_per_call_us(fn, base, calls: int = 2000, rounds: int = 9, clock=time.thread_time) -> float:
    """CPU microseconds ``fn`` costs over ``base`` per call: the median over ``rounds`` of one round's difference,
    each round timing ``calls`` of both back to back, in alternating order. Two loops timed apart and then
    subtracted read the machine's load between them as cost (negative pieces under load); a round's two loops
    share its load, and the median leaves out the rounds a burst fell across."""
    diffs = []
    for r in range(rounds):
        got = {}
        for name, f in (("base", base), ("fn", fn)) if r % 2 == 0 else (("fn", fn), ("base", base)):
            c0 = clock()
            for _ in range(calls):
                f()
            got[name] = (clock() - c0) / calls * 1e6
        diffs.append(got["fn"] - got["base"])
    return statistics.median(diffs)


def _parts(j, phases, barrier, all_reduce) -> dict:
    """Each piece of the suite's per-sample work alone, in CPU microseconds."""
    import torch

    from suite.harness import journal
    from suite.harness.journal import quiet

    x, clock, arrived = torch.zeros(256), time.perf_counter, []
    q = quiet.Quiet(j, None, [("all_reduce", "0", x.shape, x.dtype, None)])
    q.end()  # torch's functions stay as they are: this times the journal's bookkeeping only

    def journaled_sample():  # a block's record and check, its share of them per sample
        q.begin(1 << 30)
        barrier()
        all_reduce(x)
        q.done(clock(), clock())

    per_sample = added_per_call_us(journaled_sample, lambda: (barrier(), all_reduce(x)))
    t0 = clock()
    return {
        "journal_per_op_if_inside": journal.record_cost_s() * 1e6,
        "journal_per_sample_outside": per_sample,
        "arrival": _per_call_us(lambda: arrived.append(clock() - t0)),
        "timeline_mark": _per_call_us(lambda: j.timeline.sample(t0, t0)),
        "phase_block": _per_call_us(lambda: _block(phases)),
    }


def _call_cost(ctx, h, case, all_reduce, j) -> float:
    """CPU microseconds the case's own call (the collectives experiment's closure: the reduce op and the group
    named) adds to a bare ``all_reduce(x)`` of its size, both on torch's own functions."""
    from suite.harness.journal import quiet

    b = case.build(ctx, h.session)
    x = __import__("torch").zeros(case.bytes.count)
    q = quiet.Quiet(j, None, [])  # torch's own functions on torch.distributed, as in a timed round
    try:
        return added_per_call_us(lambda: b.call(False), lambda: all_reduce(x))
    finally:
        q.end()
        if b.release is not None:
            b.release()


def _block(phases) -> None:
    with phases("gather"):
        pass


def _run_child(backend: str, a) -> dict:
    cmd = [sys.executable, __file__, "--child", backend, "--sizes", a.sizes, "--iters", str(a.iters)]
    cmd += ["--rounds", str(a.rounds), "--warmup", str(a.warmup), "--gap-us", str(a.gap_us)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SUITE_PROGRESS": "off"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        print(f"error: the {backend} process failed (status {out.returncode}):\n{out.stderr[-3000:]}", file=sys.stderr)
        sys.exit(1)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _table(backend: str, got: dict) -> list[str]:
    lines = []
    for size, d in got["sizes"].items():
        op = statistics.median(d["bare"]) * 1e6
        added = [(s - b) * 1e6 for s, b in zip(d["suite"], d["bare"])]
        m, lo, hi = rounds_ci.mean_ci(added)
        cpu = statistics.median(s - b for s, b in zip(d["suite_cpu"], d["bare_cpu"])) * 1e6
        budget = budget_us(op)
        ok = within_budget(added, budget)
        med, mlo, mhi = rounds_ci.median_ci(added)
        row = f"| {backend} | {int(size) >> 10} KiB | {op:z.1f} | {m:+z.2f} [{lo:+z.2f}, {hi:+z.2f}] | "
        row += f"{med:+z.2f} [{mlo:+z.2f}, {mhi:+z.2f}] | "
        lines.append(row + f"{budget:z.2f} | {ok} | {cpu:+z.2f} |")
    return lines


def within_budget(added: list[float], budget: float) -> str:
    """Whether the suite's added time per op (each round's suite median less the bare loop's) is within the budget,
    read from the median over rounds and its sign-test interval: "yes" (the whole interval), "median only" (the
    interval reaches past it: more rounds would tell), "NO". Not the mean: on a shared or idle machine a few rounds
    carry a burst of load or a vCPU's wake-up worth tens of microseconds, which moves the mean and widens its
    interval, while what the suite adds to every op is the steady difference the median reads."""
    med, _lo, hi = rounds_ci.median_ci(added)
    return "yes" if hi <= budget else "median only" if med <= budget else "NO"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--sizes", default="1024,65536,1048576")
    ap.add_argument("--iters", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--gap-us", default="0", help="the bare loop's busy wait before each sample, in microseconds")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",") if s.strip().isdigit()]
    backends = a.backends.split(",")
    bad = [b for b in backends if b not in BACKENDS]
    if bad or a.rounds < 2 or a.iters < 1 or a.warmup < 1 or not sizes or any(s < 4 or s % 4 for s in sizes):
        print(f"error: need --backends from {','.join(BACKENDS)}, --rounds >= 2, --iters >= 1, --warmup >= 1, "
              "sizes multiples of 4 bytes", file=sys.stderr)  # fmt: skip
        return 2
    import bare_loop  # (scripts/bare_loop.py: torch, once the cheaper checks have passed)

    try:
        gap = bare_loop.gap_us(a.gap_us)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.child:
        print(json.dumps(child(a.child, sizes, a.iters, a.rounds, a.warmup, gap)))
        return 0
    load0 = os.getloadavg()
    got = {b: _run_child(b, a) for b in backends}
    load1 = os.getloadavg()
    print(f"# one process, one rank per backend; all_reduce sum float32 in place, blocking, {a.iters} samples a round,")
    gapped = f"; the bare loop busy-waits {gap:zg} us before each sample" if gap else ""
    print(f"# {a.rounds} interleaved rounds; load average {load0[0]:z.2f} before, {load1[0]:z.2f} after, "
          f"{os.cpu_count()} cores{gapped}")  # fmt: skip
    print(f"# {cpuidle.describe(cpuidle.idle_states())}")
    print("# added: the suite's median less the bare loop's, mean over rounds [95% interval]; median: the median over")
    print("# rounds of the same differences [95% interval, sign test]: a burst of load in a few rounds moves the mean")
    print("# and widens its interval, not this; budget max(1%, 0.5 us); within, read from the median: yes (its whole")
    print("# interval), median only (the interval reaches past it: more rounds), NO")
    print("| backend | size | op (us) | added wall (us) | added wall, median (us) | budget (us) | within |"
          " added CPU (us) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for b in backends:
        print("\n".join(_table(b, got[b])))
    print("\n# where the suite's per-sample work goes (CPU us, each piece alone):")
    print("| backend | journal per op, were it inside | journal per sample (outside) | arrival | timeline |"
          " phase block | the case's call over a bare op | journal writes inside samples |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for b in backends:
        p = got[b]["parts"]
        keys = ("journal_per_op_if_inside", "journal_per_sample_outside", "arrival", "timeline_mark", "phase_block")
        keys += ("call_over_bare_op",)
        print(f"| {b} | " + " | ".join(f"{p[k]:z.2f}" for k in keys) + f" | {p['journal_writes_in_samples']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
