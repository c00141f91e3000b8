"""The suite's time against the simplest honest loop: the same case, interleaved, the ratio with its spread.

    python scripts/timing_vs_bare.py [--rounds 3] [--nproc 2] [--sizes 1024,65536,1048576] [--iters 200]

Each round runs the suite's collectives experiment on one case per size (all_reduce, sum, float32, in place,
blocking, the same iterations and warm-up as the bare loop, no sample budget) with scripts/bare_inside.py, which
runs the bare loop (scripts/bare_loop.py) in the same rank processes right before and right after each case; and
the bare loop alone under torchrun, before or after the suite in alternating order from round to round. Per size
it prints the ratio suite / bare two ways, each as its median over rounds and its range:
- *same processes*: against the bare loop run beside the case, so what differs between launches (where the
  scheduler puts the ranks, what else runs) falls on both alike: the cost of the suite's code path;
- *separate launches*: against the bare loop's own launch, which also carries what the suite's processes run
  besides (threads) and the launch-to-launch noise.
A ratio near 1 means the suite's harness (journal, checks, rank samples, arrivals, threads) adds nothing to what it
times. The comparison is a benchmark, not a test: it is as good as the machine is idle (the load average is
printed). Exit status 0; 2 on bad arguments; the launcher's status if a run fails.
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


def bare(nproc: int, sizes: list[int], iters: int, warmup: int) -> dict[int, float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port", "29531"]
    cmd += [str(ROOT / "scripts" / "bare_loop.py"), "--sizes", ",".join(map(str, sizes))]
    cmd += ["--iters", str(iters), "--warmup", str(warmup)]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if out.returncode != 0:
        sys.exit(f"error: the bare loop failed (status {out.returncode}):\n{out.stderr[-2000:]}")
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
    return {int(k): v for k, v in json.loads(line).items()}


def suite(nproc: int, sizes: list[int], iters: int, warmup: int, results: Path, run: str) -> tuple[dict, dict, dict]:
    """Per size: the suite's p50, the median of the bare loop's samples run beside it, and the same through the
    functions as the suite's journal wraps them."""
    cmd = [sys.executable, "-m", "suite.launch", "--nproc", str(nproc), "--experiments", "collectives"]
    cmd += ["--min-bytes", str(min(sizes)), "--max-bytes", str(max(sizes)), "--step-factor", "4"]
    cmd += ["--dtypes", "float32", "--redops", "sum", "--iters", str(iters), "--warmup", str(warmup)]
    cmd += ["--timing", "blocking", "--budget-s", "0", "--results-root", str(results), "--run-id", run]
    sized = " or ".join(f"{s}B" for s in sizes)
    cmd += ["--", "-p", "bare_inside", "-k", f"test_collective and all_reduce and sum and inplace and ({sized})"]
    inside = results / f"{run}.bare.jsonl"
    path = os.pathsep.join(p for p in (str(ROOT / "scripts"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "SUITE_PROGRESS": "off", "PYTHONPATH": path, "BARE_INSIDE_OUT": str(inside)}
    env.update(BARE_ITERS=str(iters), BARE_WARMUP=str(warmup))
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


def _row(size: int, bare_runs: list[dict], suite_runs: list[dict]) -> str:
    ratios = [sr[size] / br[size] for br, sr in zip(bare_runs, suite_runs)]
    bm = statistics.median(br[size] for br in bare_runs)
    span = f"{min(ratios):z.2f}-{max(ratios):z.2f}"
    return f"{bm:>z14.1f} {statistics.median(ratios):>z11.3f} {span:>11}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--sizes", default="1024,65536,1048576")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.rounds < 1 or a.nproc < 2 or a.iters < 1 or any(s < 4 or s % 4 for s in sizes):
        print("error: need --rounds >= 1, --nproc >= 2, --iters >= 1, sizes multiples of 4 bytes", file=sys.stderr)
        return 2
    b_runs, s_runs, inside_runs, journaled_runs = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = ("bare", "suite") if r % 2 == 0 else ("suite", "bare")
            for side in order:
                if side == "bare":
                    b_runs.append(bare(a.nproc, sizes, a.iters, a.warmup))
                else:
                    got, beside, journaled = suite(a.nproc, sizes, a.iters, a.warmup, Path(tmp), f"r{r}")
                    s_runs.append(got)
                    inside_runs.append(beside)
                    journaled_runs.append(journaled)
            print(f"# round {r + 1} of {a.rounds} done ({' then '.join(order)})", flush=True)
    load = os.getloadavg()[0]
    print(f"# {a.nproc} ranks, Gloo, all_reduce sum float32 in place, blocking, {a.iters} samples, p50 per run")
    print(f"# load average {load:z.2f} on {os.cpu_count()} cores at the end (the ratio means most on an idle machine)")
    print(f"# suite / bare: median over {a.rounds} rounds, and its range; journaled: the bare loop in the suite's")
    print("# processes through the functions as its journal wraps them, over the bare loop there")
    print(f"{'':>26} {'same processes':^51} {'separate launches':^38}")
    head = f"{'bare p50 (us)':>14} {'suite/bare':>11} {'range':>11}"
    print(f"{'size (B)':>10} {'suite p50 (us)':>15} {head} {'journaled':>12} {head}")
    for s in sizes:
        sm = statistics.median(sr[s] for sr in s_runs)
        jr = statistics.median(j[s] / i[s] for j, i in zip(journaled_runs, inside_runs))
        print(f"{s:>10} {sm:>z15.1f} {_row(s, inside_runs, s_runs)} {jr:>z12.3f} {_row(s, b_runs, s_runs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
