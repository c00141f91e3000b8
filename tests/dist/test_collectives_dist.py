"""Every registered collective on real Gloo groups (world 2, 3, 4), through the launcher users run."""

import json
import os
import re
import subprocess
import sys

import pytest

from suite.ops.collectives import REGISTRY
from suite import metrics
from suite.results import REQUIRED_FIELDS
from tests.conftest import ROOT, all_correct, load_bench, run_suite

pytestmark = pytest.mark.slow

TINY = [
    "--experiments",
    "collectives",
    "--min-bytes",
    "96",
    "--max-bytes",
    "384",
    "--step-factor",
    "4",
    "--iters",
    "3",
    "--warmup",
    "1",
]


def _check_run(tmp_path, proc, world, dtypes):
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = load_bench(tmp_path)
    assert run["suite"]["complete"] is True
    recs = [b["extra_info"] for b in run["benchmarks"]]
    assert recs, "no records written"
    for r in recs:
        for f in REQUIRED_FIELDS:
            assert f in r, f"{f} missing in {r['op']}"
        assert r["world_size"] == world
        if r["variant"] == "barrier":  # nothing to check, and the record says so
            assert r["checked"] is False and r["n_wrong"] is None and r["unchecked_reason"]
        else:  # the check run and the timed buffers, both exact
            assert r["checked"] is True and r["n_wrong"] == 0 and r["n_wrong_timed"] == 0
        if r["size_bytes"]:
            assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * metrics.busbw_factor(r["op"], world), rel=1e-9)
    # every registered variant either ran or was skipped with the backend's reason
    ran = {r["variant"] for r in recs}
    skipped = set(re.findall(r"SKIPPED \[\d+\] .*?: gloo does not support (\w+)", proc.stdout))
    for coll in REGISTRY:
        assert coll.variant in ran or coll.variant in skipped, f"{coll.variant} neither ran nor skipped"
    assert {r["dtype"] for r in recs if r["variant"] != "barrier"} == set(dtypes)
    # machine_info names every rank's host and the versions
    mi = run["machine_info"]["suite"]
    assert len(mi["hostnames"]) == world and mi["versions"]["torch"]
    return recs


@pytest.mark.parametrize(
    "world,dtypes",
    [
        (2, ["float32", "float64", "float16", "bfloat16", "int32", "int64"]),
        (3, ["float32", "int64"]),
        (4, ["bfloat16", "int32"]),
    ],
)
def test_every_collective_exact_on_gloo(tmp_path, world, dtypes):
    proc = run_suite(tmp_path, *TINY, "--dtypes", ",".join(dtypes), nproc=world, timeout=600)
    recs = _check_run(tmp_path, proc, world, dtypes)
    # the table on rank 0's output has a row per size and the in-place columns
    assert "# all_reduce" in proc.stdout and "in-place" in proc.stdout
    assert len({r["variant"] for r in recs}) >= 8


def test_corrupted_output_is_counted_and_fails(tmp_path):
    proc = run_suite(
        tmp_path,
        *TINY,
        "--",
        "-k",
        "all_reduce or broadcast",
        nproc=2,
        env={"SUITE_INJECT_CORRUPTION": "all_reduce"},
        timeout=300,
    )
    assert proc.returncode == 6, proc.stdout[-2000:] + proc.stderr[-2000:]  # EXIT_WRONG_RESULT
    assert "wrong element" in proc.stdout + proc.stderr
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    bad = [r for r in recs if r["variant"] == "all_reduce"]
    good = [r for r in recs if r["variant"] == "broadcast"]
    assert bad and all(r["n_wrong"] >= 1 for r in bad)
    assert good and all(r["n_wrong"] == 0 for r in good)


@pytest.mark.parametrize("mode", ["pipelined", "blocking"])
def test_timing_modes_are_labelled(tmp_path, mode):
    proc = run_suite(tmp_path, *TINY, "--timing", mode, "--pipeline-depth", "4", "--", "-k", "all_reduce-sum", nproc=2)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    assert recs and all(r["timing_mode"] == mode for r in recs)
    assert all(r["ops_per_sample"] == (4 if mode == "pipelined" else 1) for r in recs)


def test_precision_mode_runs_same_count_everywhere(tmp_path):
    # A 0.001% target is never met: iterations grow until the 1 s cap, identically on both ranks
    # (a mismatch would hang the next collective and fail the run).
    proc = run_suite(
        tmp_path,
        *TINY,
        "--precision-pct",
        "0.001",
        "--max-time-s",
        "1",
        "--",
        "-k",
        "all_reduce-sum or barrier",
        nproc=2,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    assert recs and all(r["iterations"] > 3 and r["iterations"] % 3 == 0 for r in recs)
    assert all(r["precision_reached"] is False for r in recs)


@pytest.mark.parametrize(
    "args,match",
    [
        (["--dtypes", "float8"], "unknown dtype"),
        (["--max-bytes", "lots"], "not a byte size"),
        (["--experiments", "nosuch"], "unknown experiment"),
        (["--root", "5"], "ROOT 5"),
        (["--iters", "0"], "ITERS"),
    ],
)
def test_bad_input_exits_2_before_starting(tmp_path, args, match):
    proc = run_suite(tmp_path, *args, nproc=2, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert match in proc.stderr
    assert not (tmp_path / "results").exists()


def test_nccl_without_gpu_is_a_preflight_error(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "suite.launch",
        "--nproc",
        "2",
        "--backend",
        "nccl",
        "--device",
        "cpu",
        "--results-root",
        str(tmp_path / "results"),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "DEVICE=cuda" in proc.stderr
    cmd[cmd.index("cpu")] = "cuda"
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA; the no-GPU preflight cannot be shown here")
    assert proc.returncode == 3 and "no CUDA device" in proc.stderr


@pytest.fixture
def storage_dir():
    # pytest-benchmark 5.3.1 prints storage paths relative to the working directory and
    # crashes for one outside it, so the storage lives under results/ (git-ignored).
    import shutil
    import uuid

    d = ROOT / "results" / f".test-storage-{uuid.uuid4().hex[:8]}"
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_saved_run_works_with_pytest_benchmark_compare(tmp_path, storage_dir):
    storage = f"file://{storage_dir.relative_to(ROOT)}"
    proc = run_suite(
        tmp_path, *TINY, "--", "-k", "all_reduce-sum", f"--benchmark-storage={storage}", "--benchmark-autosave", nproc=2
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    saved = list(storage_dir.rglob("*.json"))
    assert len(saved) == 1, f"every rank saved a copy: {saved}"
    cmp = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "pytest-benchmark"),
            "compare",
            str(tmp_path / "results" / "run" / "bench.json"),
            str(saved[0]),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cmp.returncode == 0, cmp.stderr
    assert "all_reduce-sum-float32" in cmp.stdout
    # the in-run regression gate reads the saved run back
    proc2 = run_suite(
        tmp_path,
        *TINY,
        "--",
        "-k",
        "all_reduce-sum",
        f"--benchmark-storage={storage}",
        "--benchmark-compare",
        "--benchmark-compare-fail=min:1000000%",
        nproc=2,
        run_id="run2",
    )
    assert proc2.returncode == 0, proc2.stdout[-2000:]
    assert "Comparing against benchmarks from" in proc2.stdout + proc2.stderr


def test_make_bench_cpu_smoke(tmp_path):
    """The user's command: make bench-cpu with tiny sizes; JSON, latest link, tables."""
    res = tmp_path / "res"
    proc = subprocess.run(
        [
            "make",
            "-s",
            "bench-cpu",
            "NPROC=2",
            "EXPERIMENTS=collectives",
            "MIN_BYTES=1K",
            "MAX_BYTES=4K",
            "ITERS=3",
            "WARMUP=1",
            f"RESULTS={res}",
            f"VENV={os.path.dirname(os.path.dirname(sys.executable))}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    latest = res / "latest"
    assert latest.is_symlink()
    run = json.loads((latest / "bench.json").read_text())
    recs = [b["extra_info"] for b in run["benchmarks"]]
    ops = {r["op"] for r in recs}
    assert {
        "all_reduce",
        "broadcast",
        "reduce",
        "all_gather",
        "gather",
        "scatter",
        "reduce_scatter",
        "all_to_all",
        "barrier",
    } <= ops
    assert all_correct(recs)
    for op in ("all_reduce", "broadcast", "all_gather_into_tensor", "barrier"):
        assert f"# {op}" in proc.stdout
    # ...and it ends with the run's report (suite.report), its path printed
    m = re.search(r"^# report: (.+)$", proc.stdout, re.M)
    assert m and os.path.samefile(m.group(1), latest / "report" / "index.html"), proc.stdout[-1000:]
