"""GPU paths: NCCL through the launcher, CUDA-event timing, the cuda_graph timing mode,
GPU facts in machine_info, the NCCL flight-recorder settings, and `make bench-gpu`.

Tests marked ``gpu`` need CUDA and skip with the reason without it (they are meant
to pass on any host with one GPU or more). The rest check, on any host, what the
CPU side promises: cuda_graph is refused before anything starts, CPU runs keep
the host clock, and the flight-recorder settings are computed only for NCCL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from suite.common.config import ConfigError, build_config
from suite.common.flight_recorder import flight_recorder_env
from tests.conftest import ROOT, all_correct, load_bench, run_suite

HAS_CUDA = torch.cuda.is_available()
N_GPUS = torch.cuda.device_count() if HAS_CUDA else 0
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False here)")

TINY = [
    "--experiments",
    "collectives",
    "--min-bytes",
    "1K",
    "--max-bytes",
    "64K",
    "--step-factor",
    "8",
    "--iters",
    "5",
    "--warmup",
    "2",
    "--redops",
    "sum",
    "--dtypes",
    "float32",
]


def _launch(tmp_path, *args, timeout=300) -> subprocess.CompletedProcess:
    """python -m suite.launch with the given backend/device/knobs (no defaults added)."""
    cmd = [sys.executable, "-m", "suite.launch", "--results-root", str(tmp_path / "results"), "--run-id", "run", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


# --- CPU side: validation and settings (run everywhere) ---------------------------------------


@pytest.mark.parametrize(
    "kw", [{"device": "cpu"}, {"backend": "gloo"}, {"backend": "gloo", "device": "cuda"}, {"backend": "mpi"}]
)
def test_cuda_graph_config_needs_nccl_on_cuda(kw):
    with pytest.raises(ConfigError, match="TIMING=cuda_graph needs BACKEND=nccl and DEVICE=cuda"):
        build_config(timing_mode="cuda_graph", **kw)
    # auto/auto and explicit nccl/cuda are accepted here; the launcher resolves auto
    build_config(timing_mode="cuda_graph")
    build_config(timing_mode="cuda_graph", backend="nccl", device="cuda")


def test_cuda_graph_on_cpu_exits_2_before_starting(tmp_path):
    proc = _launch(
        tmp_path, "--nproc", "2", "--backend", "gloo", "--device", "cpu", "--timing", "cuda_graph", timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert "TIMING=cuda_graph needs BACKEND=nccl and DEVICE=cuda" in proc.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.skipif(HAS_CUDA, reason="this host has CUDA: auto resolves to NCCL, which cuda_graph accepts")
def test_cuda_graph_with_auto_on_a_cpu_host_exits_2(tmp_path):
    # auto/auto passes the knob check; the launcher's preflight resolves it to gloo/cpu and refuses
    proc = _launch(tmp_path, "--nproc", "1", "--timing", "cuda_graph", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "got gloo on cpu" in proc.stderr


def test_flight_recorder_env_names_follow_torch_version(tmp_path):
    run_dir = tmp_path / "results" / "r1"
    new = flight_recorder_env({}, run_dir, "2.13.0+cu128")
    assert new == {
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_FR_DUMP_TEMP_FILE": str(run_dir.resolve() / "failures" / "nccl_trace_rank_"),
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    }
    old = flight_recorder_env({}, run_dir, "2.4.1")
    assert set(old) == {"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_DUMP_ON_TIMEOUT"}
    # the user's own settings win, under either name
    mine = flight_recorder_env(
        {"TORCH_NCCL_TRACE_BUFFER_SIZE": "0", "TORCH_FR_DUMP_TEMP_FILE": "/x/t_", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"},
        run_dir,
        "2.13.0",
    )
    assert mine == {}


@pytest.mark.slow
def test_cpu_runs_keep_the_host_clock_and_no_flight_recorder(tmp_path):
    proc = run_suite(tmp_path, *TINY, "--max-bytes", "1K", "--", "-k", "all_reduce", nproc=2)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run = load_bench(tmp_path)
    recs = [b["extra_info"] for b in run["benchmarks"]]
    assert recs and all(r["timer"] == "host" and r["timing_mode"] == "blocking" for r in recs)
    for host in run["machine_info"]["suite"]["hosts"].values():
        assert not any(k.startswith(("TORCH_FR_", "TORCH_NCCL_DUMP")) for k in host["env"]), host["env"]


@pytest.mark.skipif(HAS_CUDA, reason="this host has a GPU; the no-GPU message cannot be shown here")
def test_make_bench_gpu_without_gpu_says_so(tmp_path):
    venv = os.path.dirname(os.path.dirname(sys.executable))
    proc = subprocess.run(
        ["make", "-s", "-o", f"{venv}/.installed", "bench-gpu", f"VENV={venv}", f"RESULTS={tmp_path / 'res'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2  # the recipe's exit 2 (bad input), which make passes on as 2
    assert "torch sees no CUDA GPU" in proc.stderr and "make bench-cpu" in proc.stderr
    assert not (tmp_path / "res").exists()


# --- GPU: need CUDA ---------------------------------------------------------------------------


def _gpu_run(tmp_path, nproc: int, *args) -> tuple[subprocess.CompletedProcess, dict, list[dict]]:
    if N_GPUS < nproc:
        pytest.skip(f"needs {nproc} GPU(s), this host has {N_GPUS}")
    proc = _launch(tmp_path, "--nproc", str(nproc), "--backend", "nccl", "--device", "cuda", *TINY, *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = load_bench(tmp_path)
    return proc, run, [b["extra_info"] for b in run["benchmarks"]]


@pytest.mark.gpu
@pytest.mark.slow
@needs_cuda
@pytest.mark.parametrize("nproc", [1, 2])
def test_nccl_all_reduce_through_the_launcher(tmp_path, nproc):
    """NCCL (world 1 on a single-GPU host, 2 where there are two), CUDA-event timing, GPU facts."""
    _, run, recs = _gpu_run(tmp_path, nproc, "--", "-k", "all_reduce or broadcast")
    assert {r["variant"] for r in recs} >= {"all_reduce", "broadcast"}
    for r in recs:
        assert (r["backend"], r["device"], r["world_size"]) == ("nccl", "cuda", nproc)
        assert r["n_wrong"] == 0
        assert r["timer"] == "cuda_event" and r["time_us"] > 0
    mi = run["machine_info"]["suite"]
    gpu = mi["gpu"]
    assert gpu["gpus"] and gpu["gpus"][0]["name"] and gpu["gpus"][0]["memory_bytes"] > 0
    assert mi["versions"]["cuda"] and mi["versions"]["nccl"]
    if gpu.get("driver") is not None:  # nvidia-smi present
        assert gpu["driver"][0].isdigit() and "GPU0" in (gpu.get("topology") or "")
    # the flight recorder dumps into this run's failures/, next to the hang diagnosis
    env = next(iter(mi["hosts"].values()))["env"]
    dump = env.get("TORCH_FR_DUMP_TEMP_FILE") or env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    assert dump and Path(dump).parent == (tmp_path / "results" / "run" / "failures").resolve()


@pytest.mark.gpu
@pytest.mark.slow
@needs_cuda
def test_cuda_graph_timing_mode(tmp_path):
    """Small-message latency from CUDA-graph replays: labelled, exact, positive."""
    _, _, recs = _gpu_run(
        tmp_path, 1, "--timing", "cuda_graph", "--pipeline-depth", "4", "--", "-k", "all_reduce or broadcast"
    )
    assert recs
    for r in recs:
        assert r["timing_mode"] == "cuda_graph" and r["ops_per_sample"] == 4 and r["timer"] == "cuda_event"
        assert r["n_wrong"] == 0 and r["time_us"] > 0 and len(r["samples_us"]) == 5


@pytest.mark.gpu
@pytest.mark.slow
@needs_cuda
@pytest.mark.parametrize("mode", ["blocking", "pipelined"])
def test_gloo_on_cuda_uses_cuda_events(tmp_path, mode):
    """Gloo with CUDA tensors (the backend comparison): exact, timed by CUDA events."""
    proc = _launch(
        tmp_path,
        "--nproc",
        "2",
        "--backend",
        "gloo",
        "--device",
        "cuda",
        *TINY,
        "--max-bytes",
        "1K",
        "--timing",
        mode,
        "--",
        "-k",
        "all_reduce",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    assert recs and all(
        r["backend"] == "gloo" and r["device"] == "cuda" and r["timer"] == "cuda_event" and r["n_wrong"] == 0
        for r in recs
    )


@pytest.mark.gpu
@needs_cuda
def test_sysinfo_gpu_facts():
    from suite.system import sysinfo

    info = sysinfo.gpu_info()
    assert len(info["gpus"]) == N_GPUS
    assert all(g["name"] and g["capability"] for g in info["gpus"])
    v = sysinfo.torch_versions()
    assert v["cuda"] and (v["nccl"] or not torch.distributed.is_nccl_available())


_GRAPH_SCRIPT = r"""
import torch, torch.distributed as dist
from suite.common.config import BenchConfig
from suite.harness.dist import init_distributed
from suite.errors import CaseFailed
from suite.harness.timing import measure
cfg = BenchConfig(backend="nccl", device="cuda", iters=3, warmup_iters=1, pipeline_depth=2, heartbeat_timeout_s=0)
ctx = init_distributed(cfg)
t = torch.ones(1024, device=ctx.device)
m = measure(ctx, cfg, lambda a: dist.all_reduce(t, group=ctx.group, async_op=a), mode="cuda_graph")
assert m.timer == "cuda_event" and m.graph_kernel_nodes != 0, m
print("real", m.graph_kernel_nodes, m.median_s)
host = torch.ones(1024)
try:
    measure(ctx, cfg, lambda a: host.add_(1), mode="cuda_graph")  # host work: nothing on the stream
except CaseFailed as e:
    print("empty", e)
else:
    raise SystemExit("an empty CUDA graph was timed")
"""


@pytest.mark.gpu
@needs_cuda
def test_cuda_graph_of_host_work_is_an_error_and_nccl_is_captured(tmp_path):
    proc = subprocess.run([sys.executable, "-c", _GRAPH_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "real" in proc.stdout and "empty the captured CUDA graph" in proc.stdout


@pytest.mark.gpu
@pytest.mark.slow
@needs_cuda
def test_nccl_algo_is_recorded_as_run(tmp_path):
    """NCCL_ALGO reaches NCCL through the launcher and the backends records name it."""
    env = dict(os.environ, NCCL_ALGO="Ring")  # one GPU: a world of 1 still runs (and records) the NCCL lane
    cmd = [
        sys.executable,
        "-m",
        "suite.launch",
        "--results-root",
        str(tmp_path / "results"),
        "--run-id",
        "run",
        "--nproc",
        str(min(2, N_GPUS)),
        "--backend",
        "nccl",
        "--device",
        "cuda",
        *TINY[2:],
        "--experiments",
        "backends",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    algo = [r for r in recs if "nccl_algo" in r]
    assert algo and all(r["nccl_algo"] == "Ring" for r in algo)


@pytest.mark.skipif(HAS_CUDA, reason="this host has a GPU; the no-GPU outcome cannot be shown here")
def test_gpu_check_without_gpu_fails_the_reference_step_and_keeps_its_logs(tmp_path):
    log = tmp_path / "logs"
    proc = subprocess.run(
        ["make", "-s", "gpu-check", f"LOG_DIR={log}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PY=sys.executable),
    )
    assert proc.returncode != 0, proc.stdout
    summary = (log / "summary.txt").read_text()
    assert "== gpu-tests" in summary and "skipped" in summary  # the gpu tests ran (and skipped, no CUDA)
    assert "torch sees no CUDA GPU" in summary
    files = sorted(p.name for p in log.iterdir())
    assert len(files) <= 8 and {"facts.txt", "gpu-tests.log", "gpu-tests.xml", "summary.txt"} <= set(files)


@pytest.mark.gpu
@pytest.mark.slow
@needs_cuda
def test_every_experiment_runs_and_checks_on_nccl(tmp_path):
    """Every experiment's GPU path (NCCL groups, CUDA tensors, the DDP reference, the pipeline's
    compute, p2p's calibrated ping-pong) runs, and every record is correct or says why it is not checked."""
    env = {
        "DDP_PARAMS": "300K",
        "MP_IN": "256",
        "MP_OUT": "256",
        "MP_BATCH": "16",
        "MP_STAGE_FEATURES": "128",
        "MP_MICROBATCH_ROWS": "16",
    }
    nproc = min(2, N_GPUS)
    cmd = [
        sys.executable,
        "-m",
        "suite.launch",
        "--results-root",
        str(tmp_path / "results"),
        "--run-id",
        "run",
        "--nproc",
        str(nproc),
        "--backend",
        "nccl",
        "--device",
        "cuda",
        "--experiments",
        "all",
        "--min-bytes",
        "1K",
        "--max-bytes",
        "64K",
        "--step-factor",
        "8",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--redops",
        "sum",
        "--dtypes",
        "float32",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=420, env=dict(os.environ, **env))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    assert {r["experiment"] for r in recs} >= {
        "collectives",
        "p2p",
        "ddp",
        "model_parallel",
        "placement",
        "backends",
        "sharded",
    }
    assert all_correct(recs)
    assert all(r["timer"] == "cuda_event" for r in recs if r["device"] == "cuda")
    # the sharded steps on NCCL: every strategy checked against single-process training, and no record
    # carries the CPU-only notes (no overlap, the all_to_all fallback) that describe Gloo on CPU
    sharded = [r for r in recs if r["experiment"] == "sharded"]
    assert {r["strategy"] for r in sharded if r["op"] == "train_step"} >= {"ddp", "fsdp2", "tp", "sp"}
    assert not [r["label"] for r in sharded if str(r.get("cpu_notes", "")).startswith("CPU:")]
