"""The default world: ``python -m suite.launch`` without --nproc on 2 usable cores (``taskset -c 0,1``) starts 2
ranks, then runs the cases that need 4 ranks (the sharded 2-D mesh) in a second, oversubscribed pass whose records
are kept, marked, and left out of the headline and the compare gate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from suite import results
from suite.report.headline import headlines
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")

TIME_FIELDS = ("time_us", "p05_us", "p50_us", "p95_us", "p99_us", "min_us", "max_us", "mean_us")


def _default_run(tmp_path: Path) -> subprocess.CompletedProcess:
    """Two usable cores, no NPROC: the sharded experiment's DDP and 2-D mesh strategies, few samples."""
    cmd = ["taskset", "-c", "0,1", sys.executable, "-m", "suite.launch", "--backend", "gloo", "--device", "cpu"]
    cmd += ["--experiments", "sharded", "--iters", "3", "--warmup", "1"]
    cmd += ["--results-root", str(tmp_path / "results"), "--run-id", "run"]
    env = dict(os.environ, SHARDED_STRATEGIES="ddp,2d", SUITE_REPORT="0")
    env.pop("NPROC_PER_NODE", None)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


def _slowed(run_dir: Path, dst: Path, pick) -> Path:
    """A copy of the run whose records ``pick`` chooses took 10x as long."""
    shutil.copytree(run_dir, dst)
    run = json.loads((dst / "bench.json").read_text())
    for rec in results.records(run):
        if pick(rec):
            rec["samples_us"] = [x * 10 for x in rec["samples_us"]]
            rec.update({k: rec[k] * 10 for k in TIME_FIELDS if rec.get(k) is not None})
    (dst / "bench.json").write_text(json.dumps(run))
    return dst


def _gate(base: Path, new: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "suite.report", "compare", str(base), str(new)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_two_cores_run_two_ranks_and_the_4_rank_cases_run_marked_apart(tmp_path):
    proc = _default_run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "# world: 2 ranks (one per usable core of 2; NPROC=n sets it)" in proc.stdout
    assert "# second pass: 2 case(s) that need 4 ranks, on 4 ranks, OVERSUBSCRIBED on 2 usable cores" in proc.stdout
    run_dir = tmp_path / "results" / "run"
    run = results.load_run(run_dir)
    recs = results.records(run)
    main = [r for r in recs if r["run_pass"] == "main"]
    over = [r for r in recs if r["run_pass"] == "oversubscribed"]
    assert {r["strategy"] for r in main} == {"ddp"} and {r["world_size"] for r in main} == {2}
    assert {r["strategy"] for r in over} == {"2d"} and {r["world_size"] for r in over} == {4}
    assert all(r["oversubscribed"] is True for r in over) and not any(results.oversubscribed(r) for r in main)
    assert [(p["name"], p["world_size"]) for p in run["suite"]["passes"]] == [("main", 2), ("oversubscribed", 4)]
    assert run["suite"]["skipped"] == []
    assert all(r["n_wrong"] == 0 for r in over)  # their checks ran
    # the headline times DDP only, and counts every case
    (line,) = headlines(run)
    assert "ddp" in line and "2d" not in line and line.endswith("0 wrong of 4 cases"), line
    assert "OVERSUBSCRIBED pass" in (run_dir / "tables.txt").read_text()
    # the compare gate passes a run whose oversubscribed cases took 10x as long, not one whose DDP did
    over10 = _slowed(run_dir, tmp_path / "over10", results.oversubscribed)
    gate = _gate(run_dir, over10)
    assert gate.returncode == 0, gate.stdout[-2000:] + gate.stderr
    assert "strategy=2d" not in gate.stdout
    main10 = _slowed(run_dir, tmp_path / "main10", lambda r: not results.oversubscribed(r))
    assert _gate(run_dir, main10).returncode == 1
