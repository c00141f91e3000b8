"""Shared helpers for the project's tests (not the benchmark plugin)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TINY_SWEEP = ("--min-bytes", "96", "--max-bytes", "384", "--step-factor", "4")
"""The tests' size sweep, launcher options: two message sizes, 96 and 384 bytes, whole elements of every
dtype and split evenly over 2, 3 or 4 ranks. ``TINY_SIZE`` is its first size alone, for a test whose
claim is not about sizes (one size costs half the cases)."""
TINY_SIZE = (*TINY_SWEEP[:2], "--max-bytes", TINY_SWEEP[1])


def load_script(name: str):
    """scripts/<name>.py as a module (a script is no package: loaded by path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_tracked(dst: Path) -> Path:
    """A copy of the repository's tracked files (no build outputs, no results) in ``dst``: where a test adds a
    file to show that nothing else has to change."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    return dst


def launch_command(tmp_path: Path, *args: str, nproc: int = 2, run_id: str = "run") -> list[str]:
    """``python -m suite.launch`` on ``nproc`` local Gloo ranks, as ``make bench-cpu`` runs it, with
    the run in ``tmp_path/results/<run_id>``."""
    return [
        sys.executable,
        "-m",
        "suite.launch",
        "--nproc",
        str(nproc),
        "--backend",
        "gloo",
        "--device",
        "cpu",
        "--results-root",
        str(tmp_path / "results"),
        "--run-id",
        run_id,
        *args,
    ]


def small_run(k: str, *, min_bytes: str = "256", max_bytes: str = "1K", iters: int = 5, **flags) -> list[str]:
    """``python -m suite.launch`` options for a small collectives run (1 warm-up call, ``iters`` timed) of
    the cases ``-k k`` selects; ``flags`` add launcher options in order (``timeout_s=5``: ``--timeout-s 5``).
    The pytest selection comes last: ``[:-3]`` leaves it off."""
    args = ["--experiments", "collectives", "--min-bytes", min_bytes, "--max-bytes", max_bytes]
    args += ["--iters", str(iters), "--warmup", "1"]
    for name, value in flags.items():
        args += [f"--{name.replace('_', '-')}", str(value)]
    return [*args, "--", "-k", k]


def run_suite(
    tmp_path: Path, *args: str, nproc: int = 2, timeout: float = 300, env: dict | None = None, run_id: str = "run"
) -> subprocess.CompletedProcess:
    """Run ``python -m suite.launch`` exactly as ``make bench-cpu`` does."""
    cmd = launch_command(tmp_path, *args, nproc=nproc, run_id=run_id)
    e = dict(os.environ)
    e.setdefault("SUITE_REPORT", "0")  # the HTML report costs seconds; tests of the report turn it on
    e.update(env or {})
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=e)


def tables_of(proc: subprocess.CompletedProcess) -> str:
    """The tables a launcher run wrote (``<run>/tables.txt``: what the terminal ended with before its short
    summary; TABLES=1 prints them there too), found from the run's own ``--results-root`` and ``--run-id``."""
    args = [str(a) for a in proc.args]
    path = Path(args[args.index("--results-root") + 1]) / args[args.index("--run-id") + 1] / "tables.txt"
    return path.read_text() if path.is_file() else ""


def shown(proc: subprocess.CompletedProcess) -> str:
    """What a launcher run shows a user: its terminal (pytest's skips and failures, the summary) and its tables."""
    return proc.stdout + tables_of(proc)


def load_bench(tmp_path: Path, run_id: str = "run") -> dict:
    with open(tmp_path / "results" / run_id / "bench.json") as fh:
        return json.load(fh)


def all_correct(recs: list[dict]) -> bool:
    """Every checked record has no wrong element; every unchecked one says why (e.g. a barrier)."""
    return all(
        r["n_wrong"] == 0 if r.get("checked", True) else (r["n_wrong"] is None and r["unchecked_reason"]) for r in recs
    )


@pytest.fixture
def suite_runner(tmp_path):
    def _run(*args, **kw):
        return run_suite(tmp_path, *args, **kw)

    return _run


def make(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    """``make ARGS`` in the repository as a user types it, with this interpreter's environment as the venv
    (never rebuilt by the test); ``env``: the environment (default: this process's)."""
    venv = Path(sys.executable).parent.parent
    # Under `make test` the tests run inside make: MAKELEVEL and MAKEFLAGS would make this one a sub-make,
    # whose messages read `make[2]: ***` where a user's read `make: ***`. A user types make at a shell.
    env = {k: v for k, v in (os.environ if env is None else env).items() if k not in _SUB_MAKE}
    return subprocess.run(
        ["make", "--no-print-directory", "-o", f"{venv}/.installed", f"VENV={venv}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


_SUB_MAKE = frozenset({"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"})
