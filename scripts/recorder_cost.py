"""What torch's flight recorder costs a profiled run: the same cases profiled with it on and off, interleaved.

    python scripts/recorder_cost.py [--rounds 6] [--nproc 2] [--experiments ddp] [--iters 20] [--warmup 2]
                                    [-k "test_ddp and mlp- and ddp]"] [--env DDP_PARAMS=2M ...] [--launch "ARGS"]

A profiled run (``SUITE_PROFILE=1``) switches the recorder on (``TORCH_FR_BUFFER_SIZE=20000``, set by the launcher:
suite/common/flight_recorder.py ``profile_env``), so that the what-if replay can key the collectives on their
process group and sequence number; ``TORCH_FR_BUFFER_SIZE=0`` keeps it off (the launcher leaves a size the user set).
Each round runs the launcher twice on the same cases, profiled both times, once with the recorder and once
without, in alternating order. Per case it prints the mean over each run's timed samples (the step the suite
reports), per arm the median over rounds, and the recorder's cost: the mean over rounds of (on - off) / off with
its 95% interval (Student's t over rounds, scripts/rounds_ci.py); the same for each run's wall time (start-up, the
profiles' export and the recorder's dump after each case included). A benchmark, not a test: the load average
before and after is printed. Exit status 0; 2 on bad arguments; 1 if a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts")]

import rounds_ci  # noqa: E402  (scripts/rounds_ci.py)

ARMS = {"recorder on": {}, "recorder off": {"TORCH_FR_BUFFER_SIZE": "0"}}


def run_once(args, tmp: Path, run_id: str, extra: dict) -> tuple[dict[str, float], float]:
    """One profiled launcher run: case -> its mean timed sample (s), and the run's wall time (s)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")}
    env.update({"SUITE_PROFILE": "1", "SUITE_REPORT": "0", **dict(e.split("=", 1) for e in args.env), **extra})
    cmd = [sys.executable, "-m", "suite.launch", "--nproc", str(args.nproc), "--experiments", args.experiments]
    cmd += ["--iters", str(args.iters), "--warmup", str(args.warmup), "--results-root", str(tmp), "--run-id", run_id]
    cmd += [*shlex.split(args.launch), "--", "-k", args.k]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-2000:])
        raise SystemExit(f"error: run {run_id} failed with status {proc.returncode}")
    doc = json.loads((tmp / run_id / "bench.json").read_text())
    means = {}
    for b in doc.get("benchmarks") or []:
        samples = (b.get("extra_info") or {}).get("samples_us") or []
        if samples:
            means[b["name"]] = statistics.fmean(samples) / 1e6
    return means, wall


def _pct(values: list[float]) -> str:
    m, lo, hi = rounds_ci.mean_ci(values)
    return f"{m:+z.1%} [{lo:+z.1%}, {hi:+z.1%}]"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--experiments", default="ddp")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("-k", default="test_ddp and mlp- and ddp]")
    p.add_argument("--env", action="append", default=[], help="KNOB=value for the runs (repeatable)")
    p.add_argument("--launch", default="", help="more arguments of python -m suite.launch, e.g. '--max-bytes 4K'")
    args = p.parse_args(argv)
    if args.rounds < 2 or args.nproc < 2 or args.iters < 1 or any("=" not in e for e in args.env):
        print("error: --rounds and --nproc from 2, --iters from 1, --env as KNOB=value", file=sys.stderr)
        return 2
    print(f"# load average before: {' '.join(f'{x:z.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    steps: dict[str, dict[str, list[float]]] = {a: {} for a in ARMS}
    walls: dict[str, list[float]] = {a: [] for a in ARMS}
    with tempfile.TemporaryDirectory(prefix="recorder-cost-") as tmp:
        for i in range(args.rounds):
            for arm in list(ARMS) if i % 2 == 0 else list(ARMS)[::-1]:
                means, wall = run_once(args, Path(tmp), f"r{i}-{arm.split()[-1]}", ARMS[arm])
                for case, m in means.items():
                    steps[arm].setdefault(case, []).append(m)
                walls[arm].append(wall)
            print(f"# round {i + 1}/{args.rounds} done", flush=True)
    on, off = ARMS
    print(f"{'case':<44} {'on (ms)':>9} {'off (ms)':>9}  recorder's cost, mean [95% interval] over rounds")
    for case in sorted(set(steps[on]) & set(steps[off])):
        a, b = steps[on][case], steps[off][case]
        rel = [x / y - 1 for x, y in zip(a, b)]
        print(f"{case:<44} {statistics.median(a) * 1e3:>z9.3f} {statistics.median(b) * 1e3:>z9.3f}  {_pct(rel)}")
    rel = [x / y - 1 for x, y in zip(walls[on], walls[off])]
    wall_on, wall_off = statistics.median(walls[on]), statistics.median(walls[off])
    print(f"{'whole run (wall, s)':<44} {wall_on:>z9.2f} {wall_off:>z9.2f}  {_pct(rel)}")
    print(f"# load average after: {' '.join(f'{x:z.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
