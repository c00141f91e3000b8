"""The suite's time against the simplest honest loop: the same case, pinned, interleaved, the ratio with its interval.

    python scripts/timing_vs_bare.py [--backend gloo] [--rounds 20] [--min-rounds 3] [--target-pct 3] [--nproc 2]
                                     [--sizes 1024,65536,1048576] [--iters 200] [--no-pin] [--gap-us 0]

Each round runs the suite's collectives experiment on one case per size (all_reduce, sum, float32, in place,
blocking, the same iterations and warm-up as the bare loop, no sample budget) with scripts/bare_inside.py, which
runs the bare loop (scripts/bare_loop.py) in the same rank processes right before and right after each case; and
(Gloo) the bare loop alone under torchrun, before or after the suite in alternating order from round to round.
Each rank, in the suite and in the bare loop alike, runs on a core of its own (``bare_loop.pin``: on 2 cores with
2 ranks, one each), unless ``--no-pin``. Per size it prints the ratio suite / bare two ways, each as its mean over
rounds with its 95% interval (Student's t):
- *same processes*: against the bare loop run beside the case, so what differs between launches (where the
  scheduler puts the ranks, what else runs) falls on both alike: the cost of the suite's code path;
- *separate launches* (Gloo only: the bare loop starts a Gloo group of its own): against the bare loop's own
  launch, which also carries what the suite's processes run besides (threads) and the launch-to-launch noise.
Rounds go on until every size's same-process interval is within ``--target-pct`` of its mean, or ``--rounds``
(the cap) have run; it prints the interval reached and, where that is wider, the rounds that would narrow it
(at the spread seen). ``--gap-us N``: the bare loop, alone and beside the case, busy-waits N microseconds before
each sample's barrier (scripts/bare_loop.py), where the suite does its own work between samples. A ratio near 1
means the suite's harness adds nothing to what it times. A benchmark, not a test: it is as good as the machine is
idle (the load average before and after is printed). Exit status 0; 2 on bad arguments; the launcher's status if
a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import rounds_ci  # noqa: E402  (scripts/rounds_ci.py)
from suite.system import cpuidle  # noqa: E402  (torch-free)


def bare(nproc: int, sizes: list[int], iters: int, warmup: int, pin: bool, gap: float = 0.0) -> dict[int, float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port", "29531"]
    cmd += [str(ROOT / "scripts" / "bare_loop.py"), "--sizes", ",".join(map(str, sizes))]
    cmd += ["--iters", str(iters), "--warmup", str(warmup), "--gap-us", str(gap)] + (["--pin"] if pin else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if out.returncode != 0:
        sys.exit(f"error: the bare loop failed (status {out.returncode}):\n{out.stderr[-2000:]}")
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
    return {int(k): v for k, v in json.loads(line).items()}


def suite(a, sizes: list[int], results: Path, run: str) -> tuple[dict, dict, dict]:
    """Per size: the suite's p50, the median of the bare loop's samples run beside it, and the same through the
    functions as the suite's journal wraps them."""
    nproc, iters, warmup = a.nproc, a.iters, a.warmup
    cmd = [sys.executable, "-m", "suite.launch", "--nproc", str(nproc), "--experiments", "collectives"]
    cmd += ["--backend", a.backend, "--device", "cpu"]
    cmd += ["--min-bytes", str(min(sizes)), "--max-bytes", str(max(sizes)), "--step-factor", "4"]
    cmd += ["--dtypes", "float32", "--redops", "sum", "--iters", str(iters), "--warmup", str(warmup)]
    cmd += ["--timing", "blocking", "--budget-s", "0", "--results-root", str(results), "--run-id", run]
    sized = " or ".join(f"{s}B" for s in sizes)
    cmd += ["--", "-p", "bare_inside", "-k", f"test_collective and all_reduce and sum and inplace and ({sized})"]
    inside = results / f"{run}.bare.jsonl"
    path = os.pathsep.join(p for p in (str(ROOT / "scripts"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "SUITE_PROGRESS": "off", "PYTHONPATH": path, "BARE_INSIDE_OUT": str(inside)}
    env.update(BARE_ITERS=str(iters), BARE_WARMUP=str(warmup), BARE_PIN="1" if a.pin else "0", BARE_GAP_US=str(a.gap))
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        print(out.stdout[-3000:], out.stderr[-3000:], file=sys.stderr)
        sys.exit(out.returncode)
    benches = json.loads((results / run / "bench.json").read_text())["benchmarks"]
    got = {}
    for b in benches:
        e = b["extra_info"]
        if e.get("op") == "all_reduce" and e.get("in_place") and e.get("size_bytes") in sizes:
            got[e["size_bytes"]] = e["p50_us"]
    beside, journaled = {}, {}
    for line in inside.read_text().splitlines():
        d = json.loads(line)
        beside[d["size"]] = statistics.median(d["before_s"] + d["after_s"]) * 1e6
        journaled[d["size"]] = statistics.median(d["journaled_s"]) * 1e6
    return got, beside, journaled


def _interval(ratios: list[float]) -> str:
    m, lo, hi = rounds_ci.mean_ci(ratios)
    return f"{m:z.3f} [{lo:z.3f}, {hi:z.3f}]" if len(ratios) > 1 else f"{m:z.3f}"


def _narrow(ratios: list[float], pct: float) -> bool:
    m, lo, hi = rounds_ci.mean_ci(ratios)
    return (hi - lo) / 2 <= pct / 100 * m


def _ratios(runs: list[dict], over: list[dict], size: int) -> list[float]:
    return [r[size] / o[size] for r, o in zip(runs, over)]


def _report(a, sizes: list[int], s_runs: list, inside: list, journaled: list, b_runs: list, loads) -> None:
    n = len(s_runs)
    print(f"# {a.nproc} ranks, {a.backend}, {'each rank pinned to a core of its own' if a.pin else 'unpinned'}, "
          f"all_reduce sum float32 in place, blocking, {a.iters} samples, p50 per run"
          + (f"; the bare loop busy-waits {a.gap:zg} us before each sample" if a.gap else ""))  # fmt: skip
    print(f"# load average {loads[0]:z.2f} before, {loads[1]:z.2f} after, on {os.cpu_count()} cores")
    print(f"# {cpuidle.describe(cpuidle.idle_states())}")
    print(f"# suite / bare: mean over {n} interleaved rounds [95% interval]; journaled: the bare loop in the "
          "suite's processes through its journal's wrappers, over the bare loop there")  # fmt: skip
    head = f"| size (B) | suite p50 (us) | same processes | rounds for ±{a.target_pct:zg}% | journaled / bare |"
    print(head + (" separate launches |" if b_runs else ""))
    print("|---" * (5 + bool(b_runs)) + "|")
    for s in sizes:
        same = _ratios(s_runs, inside, s)
        need = rounds_ci.rounds_for(same, a.target_pct / 100 * statistics.fmean(same))
        row = f"| {s} | {statistics.median(r[s] for r in s_runs):z.1f} | {_interval(same)} | "
        row += f"{'reached' if len(same) > 1 and _narrow(same, a.target_pct) else need or '?'} | "
        row += f"{_interval(_ratios(journaled, inside, s))} |"
        print(row + (f" {_interval(_ratios(s_runs, b_runs, s))} |" if b_runs else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="gloo", help="gloo or mpi")
    ap.add_argument("--rounds", type=int, default=20, help="the cap: at most this many rounds")
    ap.add_argument("--min-rounds", type=int, default=3)
    ap.add_argument("--target-pct", type=float, default=3.0, help="stop when each interval is within this")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--sizes", default="1024,65536,1048576")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-pin", dest="pin", action="store_false", help="leave the ranks where the scheduler puts them")
    ap.add_argument("--gap-us", default="0", help="the bare loop's busy wait before each sample, in microseconds")
    a = ap.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",") if s.strip().isdigit()]
    bad = a.backend not in ("gloo", "mpi") or a.rounds < 1 or a.min_rounds < 2 or a.nproc < 2 or a.iters < 1
    if bad or a.target_pct <= 0 or not sizes or any(s < 4 or s % 4 for s in sizes):
        print("error: need --backend gloo or mpi, --rounds >= 1, --min-rounds >= 2, --nproc >= 2, --iters >= 1, "
              "--target-pct > 0, sizes multiples of 4 bytes", file=sys.stderr)  # fmt: skip
        return 2
    import bare_loop  # (scripts/bare_loop.py: torch, once the cheaper checks have passed)

    try:
        a.gap = bare_loop.gap_us(a.gap_us)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    b_runs, s_runs, inside_runs, journaled_runs = [], [], [], []
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = ("bare", "suite") if r % 2 == 0 else ("suite", "bare")
            for side in order:
                if side == "suite":
                    got, beside, journaled = suite(a, sizes, Path(tmp), f"r{r}")
                    s_runs.append(got)
                    inside_runs.append(beside)
                    journaled_runs.append(journaled)
                elif a.backend == "gloo":
                    b_runs.append(bare(a.nproc, sizes, a.iters, a.warmup, a.pin, a.gap))
            print(f"# round {r + 1} of at most {a.rounds} done ({' then '.join(order)})", flush=True)
            if r + 1 >= a.min_rounds and all(_narrow(_ratios(s_runs, inside_runs, s), a.target_pct) for s in sizes):
                break
    _report(a, sizes, s_runs, inside_runs, journaled_runs, b_runs, (load0, os.getloadavg()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
