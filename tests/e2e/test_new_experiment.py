"""Adding an experiment is adding a folder (issue 25): a copy of the repository's tracked files plus the
example folder ``examples/hello`` as ``experiments/hello/`` runs end to end through the launcher with 2
Gloo ranks, nothing in the copied core changed: its cases run and are checked, its knob reaches them,
its table is printed, the report has its section, and ``python -m suite.report compare`` (what
``make compare`` runs) matches its cases across two runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from suite import results
from tests.conftest import copy_tracked

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "hello"


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """The repository's tracked files, and the example as a new experiment folder; nothing else."""
    dst = copy_tracked(tmp_path_factory.mktemp("checkout"))
    assert not (dst / "experiments" / "hello").exists()
    shutil.copytree(EXAMPLE, dst / "experiments" / "hello", ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _run(tree: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the copy's suite, not the checkout's
    e.update({"OMP_NUM_THREADS": "1", "SUITE_PROGRESS": "off", **(env or {})})
    return subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True, timeout=300, env=e)


def _launch(tree: Path, run_id: str, report: bool) -> subprocess.CompletedProcess:
    return _run(
        tree,
        "-m",
        "suite.launch",
        "--nproc",
        "2",
        "--backend",
        "gloo",
        "--device",
        "cpu",
        "--experiments",
        "hello",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--results-root",
        "results",
        "--run-id",
        run_id,
        env={"HELLO_COUNT": "16", "SUITE_REPORT": "1" if report else "0"},
    )


@pytest.fixture(scope="module")
def two_runs(tree):
    first, second = _launch(tree, "a", report=True), _launch(tree, "b", report=False)
    for p in (first, second):
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return first


def test_the_new_experiment_is_listed_and_checked_before_start(tree):
    p = _run(tree, "-m", "suite.launch", "--check", "--nproc", "2", "--experiments", "all")
    assert p.returncode == 0 and "hello" in p.stdout, p.stdout + p.stderr
    bad = _run(
        tree, "-m", "suite.launch", "--check", "--nproc", "2", "--experiments", "hello", env={"HELLO_COUNT": "0"}
    )
    assert bad.returncode == 2 and "HELLO_COUNT must be >= 1, got 0" in bad.stderr, bad.stderr


def test_its_cases_run_checked_with_its_knob(tree, two_runs):
    run = results.load_run(tree / "results" / "a")
    recs = results.records(run)
    assert sorted((r["experiment"], r["op"], r["count"]) for r in recs) == [
        ("hello", "all_reduce", 16),
        ("hello", "all_reduce", 64),
    ]
    assert all(r["checked"] and r["n_wrong"] == 0 and r["world_size"] == 2 for r in recs)
    assert run["suite"]["config"]["hello"] == {"count": 16}


def test_its_table_is_written_and_its_section_is_in_the_report(tree, two_runs):
    assert "# hello: all_reduce of rank + 1" in (tree / "results" / "a" / "tables.txt").read_text()
    md = (tree / "results" / "a" / "report" / "report.md").read_text()
    assert "# hello: all_reduce of rank + 1" in md and "hello: one row per all_reduce size" in md


def test_compare_matches_its_cases(tree, two_runs):
    p = _run(tree, "-m", "suite.report", "compare", "results/a", "results/b", "--max-inconclusive", "1")
    assert "2 matched case(s)" in p.stdout, p.stdout + p.stderr
    assert "only in base" not in p.stdout, p.stdout
