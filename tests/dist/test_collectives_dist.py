"""Every registered collective on real Gloo groups (world 2, 3, 4), through the launcher users run."""

import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from suite.ops.collectives import REGISTRY
from suite import metrics
from suite.results import REQUIRED_FIELDS
from tests.conftest import ROOT, TINY_SIZE, TINY_SWEEP, all_correct, load_bench, run_suite, tables_of

pytestmark = pytest.mark.slow

TINY = ["--experiments", "collectives", *TINY_SIZE, "--iters", "3", "--warmup", "1"]
"""One size, 1 warm-up and 3 timed calls: for the tests whose claim is not about sizes."""


def _check_run(tmp_path, proc, world, dtypes):
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = load_bench(tmp_path)
    assert run["suite"]["complete"] is True
    recs = [b["extra_info"] for b in run["benchmarks"]]
    assert recs, "no records written"
    for r in recs:
        for f in REQUIRED_FIELDS:
            assert f in r, f"{f} missing in {r['op']}"
        assert r["world_size"] == (world // 2 if r.get("group") == "interleaved" else world)
        if r["variant"] == "barrier":  # nothing to check, and the record says so
            assert r["checked"] is False and r["n_wrong"] is None and r["unchecked_reason"]
        else:  # the check run and the timed buffers, both exact
            assert r["checked"] is True and r["n_wrong"] == 0 and r["n_wrong_timed"] == 0
        if r["size_bytes"]:  # the factor of the case's group: a half of the world for the interleaved groups
            factor = metrics.busbw_factor(r["op"], r["world_size"])
            assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * factor, rel=1e-9)
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
    "world,dtypes,sizes",
    [
        # every dtype and the two-size sweep on 2 ranks; 3 and 4 ranks add the uneven and the larger
        # world at one size (the sizes were shown on 2 ranks)
        (2, ["float32", "float64", "float16", "bfloat16", "int32", "int64"], TINY_SWEEP),
        (3, ["float32", "int64"], TINY_SIZE),
        (4, ["bfloat16", "int32"], TINY_SIZE),
    ],
)
def test_every_collective_exact_on_gloo(tmp_path, world, dtypes, sizes):
    # at 4 ranks every case also runs on the even and the odd ranks at once: group ranks that are not global ranks
    # (a root or a place taken as a global rank fails there: the op table's rooted calls did, with src=/dst=)
    env = {"COLLECTIVES_GROUPS": "world,interleaved"} if world == 4 else None
    proc = run_suite(tmp_path, *TINY, *sizes, "--dtypes", ",".join(dtypes), nproc=world, timeout=600, env=env)
    recs = _check_run(tmp_path, proc, world, dtypes)
    if world == 4:
        halves = [r for r in recs if r.get("group") == "interleaved"]
        assert {r["label"].removesuffix("-interleaved") for r in halves} == {
            r["label"] for r in recs if r.get("group") is None
        }
        assert all(r["world_size"] == 2 and r["groups"] == [[0, 2], [1, 3]] for r in halves)
        assert "on the interleaved groups [0, 2] [1, 3]" in tables_of(proc)
    # the table on rank 0's output has a row per size and the in-place columns
    assert "# all_reduce" in tables_of(proc) and "in-place" in tables_of(proc)
    assert len({r["variant"] for r in recs}) >= 8
    n_sizes = 2 if sizes == TINY_SWEEP else 1
    assert len({r["size_bytes"] for r in recs if r["variant"] == "all_reduce"}) == n_sizes


def test_corrupted_output_is_counted_and_fails(tmp_path):
    # Every rank exits 1 and torchrun ends the job at the first exit; rank 0 is planted to end its
    # session 3 s after the others (a slow disk): its last write and its tables must not be lost.
    proc = run_suite(
        tmp_path,
        *TINY,
        "--",
        "-k",
        "all_reduce or broadcast",
        "-p",
        "tests.plants.rank0_slow_end",
        nproc=2,
        env={"SUITE_INJECT_CORRUPTION": "all_reduce"},
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 6, out[-4000:]  # EXIT_WRONG_RESULT
    assert "wrong element" in out
    run = load_bench(tmp_path)
    assert run["suite"]["complete"] is True and run["suite"]["exit_status"] == 6, run["suite"]
    assert run["suite"]["failed"] == []  # wrong elements are the records' n_wrong, not a failed check
    assert tables_of(proc) and "hang diagnosis" not in out, out[-4000:]  # rank 0's summary wrote its tables
    recs = [b["extra_info"] for b in run["benchmarks"]]
    bad = [r for r in recs if r["variant"] == "all_reduce"]
    good = [r for r in recs if r["variant"] == "broadcast"]
    assert bad and all(r["n_wrong"] >= 1 for r in bad)
    assert good and all(r["n_wrong"] == 0 for r in good)


def _all_reduce_sum(tmp_path, mode: str, *pytest_args: str, storage: str, run_id: str = "run"):
    """all_reduce-sum alone in timing ``mode`` (pipeline depth 4 where pipelined) on 2 ranks, with a
    pytest-benchmark storage and ``pytest_args``."""
    return run_suite(
        tmp_path,
        *TINY,
        "--timing",
        mode,
        "--pipeline-depth",
        "4",
        "--",
        "-k",
        "all_reduce-sum",
        f"--benchmark-storage={storage}",
        *pytest_args,
        nproc=2,
        run_id=run_id,
    )


@pytest.fixture(scope="module")
def timed_run(request, tmp_path_factory):
    """One launch per timing mode, autosaved to its own pytest-benchmark storage under results/ (git-ignored;
    pytest-benchmark 5.3.1 prints storage paths relative to the working directory and crashes for one outside
    it): its mode, tmp (the results root's parent), storage_dir, storage (the URL) and proc (the launcher's
    output), read by the timing-mode test and the storage test."""
    import shutil
    import uuid

    mode = request.param
    tmp = tmp_path_factory.mktemp(mode)
    storage_dir = ROOT / "results" / f".test-storage-{uuid.uuid4().hex[:8]}"
    storage = f"file://{storage_dir.relative_to(ROOT)}"
    proc = _all_reduce_sum(tmp, mode, "--benchmark-autosave", storage=storage)
    yield SimpleNamespace(mode=mode, tmp=tmp, storage_dir=storage_dir, storage=storage, proc=proc)
    shutil.rmtree(storage_dir, ignore_errors=True)


@pytest.mark.parametrize("timed_run", ["pipelined", "blocking"], indirect=True)
def test_timing_modes_are_labelled(timed_run):
    mode, tmp_path, proc = timed_run.mode, timed_run.tmp, timed_run.proc
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


@pytest.mark.parametrize("timed_run", ["blocking"], indirect=True)
def test_saved_run_works_with_pytest_benchmark_compare(timed_run):
    tmp_path, storage_dir, proc = timed_run.tmp, timed_run.storage_dir, timed_run.proc
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
    proc2 = _all_reduce_sum(
        tmp_path,
        "blocking",
        "--benchmark-compare",
        "--benchmark-compare-fail=min:1000000%",
        storage=timed_run.storage,
        run_id="run2",
    )
    assert proc2.returncode == 0, proc2.stdout[-2000:]
    assert "Comparing against benchmarks from" in proc2.stdout + proc2.stderr


def test_make_bench_cpu_smoke(tmp_path):
    """The user's command: make bench-cpu with one tiny size and one reduction (every op still runs; the
    sizes, dtypes and reductions are the other tests'); JSON, latest link, tables, report."""
    res = tmp_path / "res"
    proc = subprocess.run(
        [
            "make",
            "-s",
            "bench-cpu",
            "NPROC=2",
            "EXPERIMENTS=collectives",
            "MIN_BYTES=1K",
            "MAX_BYTES=1K",
            "REDOPS=sum",
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
        assert f"# {op}" in (latest / "tables.txt").read_text()  # the tables, for grep (TABLES=1: also printed)
    # ...and it ends with the run's report (suite.report.cli), its path printed
    m = re.search(r"^# report: (.+)$", proc.stdout, re.M)
    assert m and os.path.samefile(m.group(1), latest / "report" / "index.html"), proc.stdout[-1000:]
