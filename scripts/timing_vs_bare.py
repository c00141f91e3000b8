"""The suite's time against the simplest honest loop: the same case, interleaved, the ratio with its spread.

    python scripts/timing_vs_bare.py [--rounds 3] [--nproc 2] [--sizes 1024,65536,1048576] [--iters 200]

Each round runs scripts/bare_loop.py under torchrun, then the suite's collectives experiment on the same case
(all_reduce, sum, float32, in place, blocking, the same sizes, iterations and warm-up, no sample budget), in
alternating order from round to round, so a drift of the machine's load falls on both. Per size it prints each
side's median over rounds and the ratio suite / bare: its median over rounds and its range. A ratio near 1 means
the suite's harness (journal, checks, rank samples, arrivals, threads) adds nothing to what it times. The
comparison is a benchmark, not a test: it is as good as the machine is idle (the load average is printed).
Exit status 0; 2 on bad arguments; the launcher's status if a run fails.
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


def suite(nproc: int, sizes: list[int], iters: int, warmup: int, results: Path, run: str) -> dict[int, float]:
    cmd = [sys.executable, "-m", "suite.launch", "--nproc", str(nproc), "--experiments", "collectives"]
    cmd += ["--min-bytes", str(min(sizes)), "--max-bytes", str(max(sizes)), "--step-factor", "4"]
    cmd += ["--dtypes", "float32", "--redops", "sum", "--iters", str(iters), "--warmup", str(warmup)]
    cmd += ["--timing", "blocking", "--budget-s", "0", "--results-root", str(results), "--run-id", run]
    sized = " or ".join(f"{s}B" for s in sizes)
    cmd += ["--", "-k", f"test_collective and all_reduce and sum and inplace and ({sized})"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "SUITE_PROGRESS": "off"})
    if out.returncode != 0:
        print(out.stdout[-3000:], out.stderr[-3000:], file=sys.stderr)
        sys.exit(out.returncode)
    benches = json.loads((results / run / "bench.json").read_text())["benchmarks"]
    got = {}
    for b in benches:
        e = b["extra_info"]
        if e.get("op") == "all_reduce" and e.get("in_place") and e.get("size_bytes") in sizes:
            got[e["size_bytes"]] = e["p50_us"]
    return got


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
    b_runs, s_runs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = ("bare", "suite") if r % 2 == 0 else ("suite", "bare")
            for side in order:
                if side == "bare":
                    b_runs.append(bare(a.nproc, sizes, a.iters, a.warmup))
                else:
                    s_runs.append(suite(a.nproc, sizes, a.iters, a.warmup, Path(tmp), f"r{r}"))
            print(f"# round {r + 1} of {a.rounds} done ({' then '.join(order)})", flush=True)
    load = os.getloadavg()[0]
    print(f"# {a.nproc} ranks, Gloo, all_reduce sum float32 in place, blocking, {a.iters} samples, p50 per run")
    print(f"# load average {load:z.2f} on {os.cpu_count()} cores at the end (the ratio means most on an idle machine)")
    print(f"{'size (B)':>10} {'bare p50 (us)':>14} {'suite p50 (us)':>15} {'suite/bare':>11} {'range':>15}")
    for s in sizes:
        ratios = [sr[s] / br[s] for br, sr in zip(b_runs, s_runs)]
        bm = statistics.median(br[s] for br in b_runs)
        sm = statistics.median(sr[s] for sr in s_runs)
        span = f"{min(ratios):z.2f}-{max(ratios):z.2f}"
        print(f"{s:>10} {bm:>z14.1f} {sm:>z15.1f} {statistics.median(ratios):>z11.3f} {span:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
