"""The bare reference loop is independent of the suite, and the comparison refuses bad arguments up front.

(The comparison itself is a benchmark, ``make timing-vs-bare``: its ratio belongs in docs/measurements/, not in a
timed assertion here.)"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize("script", ["bare_loop.py", "bare_inside.py"])
def test_the_bare_loop_imports_nothing_from_the_suite(script):
    """Neither the loop nor the plugin that runs it inside the suite's ranks."""
    tree = ast.parse((ROOT / "scripts" / script).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names and not {n for n in names if n.split(".")[0] in ("suite", "experiments", "tests")}


@pytest.mark.parametrize(
    "args", [["--sizes", "1000,6"], ["--backend", "nccl"], ["--target-pct", "0"], ["--min-rounds", "1"]]
)
def test_the_comparison_rejects_bad_arguments_before_starting_a_rank(args):
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "timing_vs_bare.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.startswith("error: ") and len(r.stderr.splitlines()) == 1


PIN = """
import json, os, threading, sys
sys.path.insert(0, "scripts")
import bare_loop
allowed = os.sched_getaffinity(0)
early = threading.Thread(target=threading.Event().wait, args=(60,), daemon=True)
early.start()  # a thread that exists before the pin (a process group's) is pinned too
for local in sys.argv[1:]:
    os.environ["LOCAL_RANK"] = local
    core = bare_loop.pin()
    later = [os.sched_getaffinity(int(t)) for t in os.listdir("/proc/self/task")]
    print(json.dumps({"core": core, "cores": sorted(os.sched_getaffinity(0)), "threads": [sorted(c) for c in later]}))
    for t in os.listdir("/proc/self/task"):  # unpinned again for the next local rank
        try:
            os.sched_setaffinity(int(t), allowed)
        except OSError:  # a thread that ended meanwhile
            pass
"""


def test_each_rank_is_pinned_to_its_own_core_every_thread_of_it():
    # local ranks 0, 1 and 5 pinned in turn in one interpreter (it imports torch once, not three times)
    import json
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK")}
    locals_ = ["0", "1", "5"]
    r = subprocess.run(
        [sys.executable, "-c", PIN, *locals_], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env
    )
    assert r.returncode == 0, r.stderr
    allowed = sorted(os.sched_getaffinity(0))
    rounds = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rounds) == len(locals_)
    for local, got in zip(locals_, rounds):
        assert got["core"] == allowed[int(local) % len(allowed)] and got["cores"] == [got["core"]], (local, got)
        assert len(got["threads"]) >= 2 and all(t == [got["core"]] for t in got["threads"]), (local, got)


def test_the_bare_loops_gap_is_microseconds_at_least_0_and_a_busy_wait_of_at_least_that():
    sys.path.insert(0, str(ROOT / "scripts"))
    import time

    import bare_loop

    assert bare_loop.gap_us("0") == 0.0 and bare_loop.gap_us("2.5") == 2.5
    for bad in ("-1", "x", "nan", "inf", ""):
        with pytest.raises(ValueError, match="--gap-us needs a number of microseconds >= 0"):
            bare_loop.gap_us(bad)
    t0 = time.perf_counter()
    bare_loop.spin(200.0)
    assert time.perf_counter() - t0 >= 200e-6


@pytest.mark.parametrize("script", ["bare_loop", "timing_vs_bare", "suite_cost"])
def test_a_bad_gap_is_refused_in_one_line_before_a_process_group(script, capsys):
    """In this process (torch is imported here already): the bare loop, and both commands that run it."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import importlib

    import torch.distributed as dist

    assert importlib.import_module(script).main(["--gap-us", "-3"]) == 2 and not dist.is_initialized()
    err = capsys.readouterr().err
    assert err.startswith("error: --gap-us") and len(err.splitlines()) == 1
