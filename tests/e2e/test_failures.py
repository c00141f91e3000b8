"""Failure behaviour (reliability.md §7): real faults in real Gloo groups, each with a time bound.

Faults are injected into the real processes (SIGKILL, SIGTERM, SIGSTOP, an exception,
a shape mismatch) through SUITE_INJECT_* variables read by the plugin/experiment;
the checks are the user's view: exit status, message, time, and the results file.
"""

import json
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, all_correct, launch_command, run_suite, small_run

pytestmark = pytest.mark.slow

# Enough small cases that a fault after the 3rd lands mid-run.
SMALL = small_run("all_reduce or broadcast or all_gather", iters=3, heartbeat_timeout_s=5, timeout_s=30)


def _bench(tmp_path):
    p = tmp_path / "results" / "run" / "bench.json"
    return json.loads(p.read_text()) if p.exists() else None


def _timed(tmp_path, *args, nproc=3, env=None, timeout=120):
    t0 = time.monotonic()
    proc = run_suite(tmp_path, *args, nproc=nproc, env=env, timeout=timeout)
    return proc, time.monotonic() - t0


def _assert_partial_results_valid(tmp_path):
    run = _bench(tmp_path)
    assert run is not None, "the cases completed before the fault were lost"
    assert run["suite"]["complete"] is False
    assert len(run["benchmarks"]) >= 2
    assert all_correct([b["extra_info"] for b in run["benchmarks"]])


@pytest.mark.parametrize("action", ["kill", "term"])
def test_dead_rank_ends_every_rank_quickly(tmp_path, action):
    proc, took = _timed(tmp_path, *SMALL, env={"SUITE_INJECT_FAULT": f"{action}:1:3"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 5, out[-3000:]
    assert took < 60, f"took {took:.0f} s"
    assert "first failure: rank 1 on host" in out, out[-3000:]
    _assert_partial_results_valid(tmp_path)


def test_rank0_lost_keeps_written_results(tmp_path):
    proc, took = _timed(tmp_path, *SMALL, env={"SUITE_INJECT_FAULT": "kill:0:3"})
    assert proc.returncode != 0 and took < 60
    _assert_partial_results_valid(tmp_path)


def test_frozen_rank_is_named_by_the_heartbeat(tmp_path):
    # SIGSTOP produces no socket error: without the heartbeat the others would wait for
    # the 30 s group timeout (or 30 min with torch's default).
    proc, took = _timed(tmp_path, *SMALL, env={"SUITE_INJECT_FAULT": "stop:2:3"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 5, out[-3000:]
    assert "rank 2 (host" in out and "stopped responding" in out, out[-3000:]
    assert took < 60, f"took {took:.0f} s"
    _assert_partial_results_valid(tmp_path)
    failures = list((tmp_path / "results" / "run" / "failures").glob("rank*.json"))
    assert failures and all(json.loads(f.read_text())["lost_ranks"] == [2] for f in failures)


def test_exception_on_one_rank_stops_the_run(tmp_path):
    proc, took = _timed(tmp_path, *SMALL, env={"SUITE_INJECT_FAULT": "raise:1:3"}, nproc=2)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "injected error on rank 1" in out
    assert took < 60
    _assert_partial_results_valid(tmp_path)


def test_shape_mismatch_is_a_named_error_in_debug_mode(tmp_path):
    proc, took = _timed(
        tmp_path,
        "--debug",
        *SMALL[:-3],
        "--",
        "-k",
        "all_reduce-sum",
        env={"SUITE_INJECT_MISMATCH": "all_reduce"},
        nproc=2,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "mismatch" in out.lower() and "CollectiveFingerPrint" in out, out[-3000:]
    assert took < 60


def test_interrupt_keeps_completed_cases_and_leaves_nothing_running(tmp_path):
    cmd = launch_command(
        tmp_path, "--experiments", "collectives", "--min-bytes", "1K", "--max-bytes", "64K", "--iters", "20"
    )
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bench = tmp_path / "results" / "run" / "bench.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not bench.exists():
        time.sleep(0.2)
    assert bench.exists(), "no case finished in time"
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    run = json.loads(bench.read_text())
    assert run["suite"]["complete"] is False and run["benchmarks"]
    assert run["suite"]["interrupted_by_signal"] == signal.SIGINT
    time.sleep(0.5)
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert leftover == [], f"processes left behind: {leftover}"


def test_unresolvable_master_addr_exit_4(tmp_path):
    proc, took = _timed(tmp_path, "--nnodes", "2", "--node-rank", "1", "--master-addr", "no-such-host.invalid")
    assert proc.returncode == 4 and "does not resolve" in proc.stderr
    assert took < 20 and not (tmp_path / "results").exists()


def test_port_in_use_exit_4(tmp_path):
    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        port = s.getsockname()[1]
        proc, _ = _timed(
            tmp_path, "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", str(port)
        )
    assert proc.returncode == 4 and "already in use" in proc.stderr


def test_missing_node_fails_within_rendezvous_timeout(tmp_path):
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    proc, took = _timed(
        tmp_path,
        "--nnodes",
        "2",
        "--node-rank",
        "0",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(port),
        "--rdzv-timeout-s",
        "10",
        "--experiments",
        "collectives",
        nproc=1,
        timeout=120,
    )
    assert proc.returncode != 0
    assert took < 60, f"a missing node held the run for {took:.0f} s"


def test_sizes_that_do_not_fit_exit_3(tmp_path):
    proc, _ = _timed(tmp_path, "--max-bytes", "512G", "--min-bytes", "256G")
    assert proc.returncode == 3 and "lower MAX_BYTES" in proc.stderr


def test_missing_interface_exit_3(tmp_path):
    proc, _ = _timed(tmp_path, env={"GLOO_SOCKET_IFNAME": "nosuchif0"})
    assert proc.returncode == 3 and "nosuchif0" in proc.stderr


def test_unknown_backend_exit_2(tmp_path):
    cmd = [sys.executable, "-m", "suite.launch", "--backend", "gloo;nccl", "--results-root", str(tmp_path / "r")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown backend" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_a_selection_that_matches_nothing_exits_7_not_5(tmp_path):
    """pytest's 'no tests collected' (5) must not read as the suite's 'lost a peer' (5)."""
    proc = run_suite(
        tmp_path,
        "--experiments",
        "collectives",
        "--max-bytes",
        "1K",
        "--iters",
        "2",
        "--warmup",
        "1",
        "--",
        "-k",
        "no_case_is_called_this",
    )
    assert proc.returncode == 7, proc.stderr[-2000:]
    assert "matched no case" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("# exit status 7 (nothing selected); make reports")
