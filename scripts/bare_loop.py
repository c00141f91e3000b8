"""The simplest honest timing loop of one collective, independent of the suite (it imports nothing from it).

    torchrun --nproc-per-node 2 scripts/bare_loop.py --sizes 1024,65536,1048576 --iters 200 --warmup 5

Per size: a float32 tensor of that many bytes, ``warmup`` untimed in-place all_reduce(sum) calls, then
``iters`` samples, each a barrier and one blocking all_reduce timed by ``time.perf_counter`` from the barrier's
return to the call's return. A sample is the maximum over ranks of that iteration's time; the result is the
median over samples, in microseconds. Rank 0 prints one JSON line ``{"<size>": <median us>, ...}``.
This is what the suite's collectives experiment measures in its blocking mode (docs/metrics.md), written as
plainly as possible, so the two can be run side by side (scripts/timing_vs_bare.py, ``make timing-vs-bare``).
``samples`` is the loop itself; scripts/bare_inside.py runs it inside the suite's own ranks. With ``--pin``
(``pin``) each rank runs on a core of its own, as the suite's ranks do under the comparison. With ``--gap-us N``
each rank busy-waits N microseconds before each timed sample's barrier (``spin``), where the suite does its own
work between two samples: how long a rank worked since its last op changes what the next op costs on some
backends (on Gloo, the hand-off to its worker thread), and this shows it with no suite code at all.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def spin(us: float) -> None:
    """Busy-wait ``us`` microseconds on this thread (the CPU kept busy, as work between two ops keeps it)."""
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def gap_us(text: str) -> float:
    """``--gap-us``: microseconds, a finite number >= 0; ValueError (its message the one line to print) if not."""
    try:
        us = float(text)
    except ValueError:
        us = math.nan
    if not (math.isfinite(us) and us >= 0):
        raise ValueError(f"--gap-us needs a number of microseconds >= 0, not {text!r}")
    return us


def samples(
    size: int, iters: int, warmup: int, barrier=dist.barrier, all_reduce=dist.all_reduce, gap: float = 0.0
) -> list[float]:
    """The ``iters`` samples of one size, in seconds: each the maximum over ranks of one timed all_reduce;
    ``gap``: microseconds of busy wait before each sample's barrier (0: none)."""
    x = torch.zeros(size // 4, dtype=torch.float32)  # stays 0 under repeated in-place sums
    for _ in range(warmup):
        all_reduce(x)
    own = []
    for _ in range(iters):
        if gap:
            spin(gap)
        barrier()
        t0 = time.perf_counter()
        all_reduce(x)
        own.append(time.perf_counter() - t0)
    every = torch.tensor(own, dtype=torch.float64)
    all_reduce(every, op=dist.ReduceOp.MAX)
    return every.tolist()


LOCAL_RANK_VARS = ("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK")
"""Where a launcher puts a rank's index on its host (torchrun, MPICH, Open MPI)."""


def pin() -> int | None:
    """Run this process, every thread of it, on one core of those it may use: the ``local rank``-th (modulo their
    number), so ranks on one host each get their own while there are as many cores. The core, or None where no
    launcher says the local rank."""
    local = next((os.environ[v] for v in LOCAL_RANK_VARS if os.environ.get(v, "").isdigit()), None)
    if local is None:
        return None
    cores = sorted(os.sched_getaffinity(0))
    core = cores[int(local) % len(cores)]
    for tid in os.listdir("/proc/self/task"):  # threads started later inherit it
        try:
            os.sched_setaffinity(int(tid), {core})
        except OSError:  # a thread that ended meanwhile
            pass
    return core


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,65536,1048576", help="message sizes in bytes, comma-separated")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--pin", action="store_true", help="each rank on a core of its own")
    ap.add_argument("--gap-us", default="0", help="busy wait of this many microseconds before each sample")
    args = ap.parse_args(argv)
    try:
        gap = gap_us(args.gap_us)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.pin:
        pin()
    dist.init_process_group("gloo")
    medians = {
        s: statistics.median(samples(int(s), args.iters, args.warmup, gap=gap)) * 1e6 for s in args.sizes.split(",")
    }
    if dist.get_rank() == 0:
        print(json.dumps(medians), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
