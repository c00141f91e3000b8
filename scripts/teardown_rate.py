"""How often the article's DDP example aborts at exit with Gloo, and the corrected teardown beside it.

    python scripts/teardown_rate.py N [--launcher spawn|torchrun] [--epochs E --samples S]

Runs examples/ddp_source_example.py (2 ranks, CPU) N times with ``--teardown as-is`` and N times
with ``--teardown corrected``, interleaved, and prints per teardown: runs, exits 0, aborts with
"terminate called without an active exception" (the Gloo teardown race: see the example's
docstring), other failures. Exit status 1 if the corrected teardown ever failed. Short runs
(1 epoch of 256 samples) reach the teardown more often per minute; the race is at the end.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "ddp_source_example.py"
ABORT = "terminate called without an active exception"


def run_once(teardown: str, launcher: str, epochs: int, samples: int) -> str:
    args = [str(EXAMPLE), "--epochs", str(epochs), "--samples", str(samples), "--teardown", teardown]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["OMP_NUM_THREADS"] = "1"
    if launcher == "torchrun":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *args]
    else:
        cmd = [sys.executable, *args, "--nprocs", "2"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    if p.returncode == 0:
        return "exit 0"
    return "teardown abort" if ABORT in p.stderr else f"other failure (status {p.returncode})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("--launcher", choices=("spawn", "torchrun"), default="spawn")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--samples", type=int, default=256)
    a = ap.parse_args(argv)
    if a.n < 1:
        ap.error("N must be at least 1")
    got = {t: collections.Counter() for t in ("as-is", "corrected")}
    for i in range(a.n):
        for t in got:
            got[t][run_once(t, a.launcher, a.epochs, a.samples)] += 1
        print(f"# {i + 1}/{a.n}: " + "; ".join(f"{t}: {dict(c)}" for t, c in got.items()), flush=True)
    for t, c in got.items():
        print(
            f"{t:>9} ({a.launcher}): {a.n} runs, {c['exit 0']} exit 0, {c['teardown abort']} teardown abort "
            f"({100 * c['teardown abort'] / a.n:z.0f}%), {a.n - c['exit 0'] - c['teardown abort']} other"
        )
    return 0 if got["corrected"]["exit 0"] == a.n else 1


if __name__ == "__main__":
    sys.exit(main())
