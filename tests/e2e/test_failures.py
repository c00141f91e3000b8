"""Failure behaviour (reliability.md §7): real faults in real Gloo groups, each with a time bound.

Faults are injected into the real processes (SIGKILL, SIGTERM, SIGSTOP, an exception,
a shape mismatch) through SUITE_INJECT_* variables read by the plugin/experiment;
the checks are the user's view: exit status, message, time, and the results file.
"""

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import ROOT, all_correct, launch_command, load_bench, run_suite, small_run

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


@pytest.mark.parametrize(
    "backend, action, status, how",
    [
        ("gloo", "kill", 5, "killed by SIGKILL"),
        ("gloo", "term", 5, "killed by SIGTERM"),
        # mpiexec's own summary names neither the rank nor how it ended: each rank's parent does (rank_exits)
        ("mpi", "kill", 5, "killed by SIGKILL"),
        ("mpi", "exit", 1, "exited with status 3"),  # mpiexec ends no rank for it: the launcher does, at once
    ],
)
def test_dead_rank_ends_every_rank_quickly(tmp_path, backend, action, status, how):
    proc, took = _timed(tmp_path, "--backend", backend, *SMALL, env={"SUITE_INJECT_FAULT": f"{action}:1:3"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == status, out[-3000:]
    assert took < 60, f"took {took:.0f} s"
    assert re.search(rf"# first failure: rank 1 on host \S+ {how}\n", out), out[-3000:]
    _assert_partial_results_valid(tmp_path)


def test_ranks_whose_own_options_leave_no_case_exit_7_on_mpi(tmp_path):
    """A rank's pytest options beyond -k / -m (here --deselect) can leave it no case, which the host's collection
    does not see: every rank exits 7 and so does the run, on MPI as under torchrun."""
    args = small_run("all_reduce-sum and 256B", max_bytes="256", iters=1)
    proc = run_suite(tmp_path, "--backend", "mpi", *args, "--deselect", "experiments/collectives/cases.py")
    assert proc.returncode == 7, proc.stderr[-3000:]
    assert "# nothing measured: the case selection (K= / -k) matched no case" in proc.stderr, proc.stderr[-3000:]


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
    # once every other rank is ending, the launcher ends the frozen one at once, not after its grace
    assert "rank(s) 2 named lost, every other rank ending: ending the ranks now" in proc.stderr, out[-3000:]
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
    # an interrupt is no failure and no hang: its own verdict, no hang/ files, the kept cases' tables
    n = len(run["benchmarks"])
    assert re.search(rf"^# verdict: INTERRUPTED: {n} cases?, 0 wrong, 0 unchecked; exit status 130", out, re.M), out
    # only the suite's lines: no pytest KeyboardInterrupt block, no pytest-benchmark warning of the interrupted case
    for theirs in ("KeyboardInterrupt", "!!!", "warnings summary", "Benchmark fixture"):
        assert theirs not in out + err, (theirs, out[-3000:], err[-3000:])
    assert not (bench.parent / "hang").exists(), sorted(p.name for p in (bench.parent / "hang").iterdir())
    assert not (bench.parent / "failures").exists(), sorted(p.name for p in (bench.parent / "failures").iterdir())
    assert (bench.parent / "tables.txt").read_text().count("\n        ") >= 1  # a table row of a kept case
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
        "3",  # the launcher's default is 120 s: a run that ignored this would outlive the bound below
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


def test_a_selection_that_matches_nothing_is_bad_input_before_any_rank(tmp_path):
    """K= / -k that matches no case of the chosen experiments (at this world size) is one line and status 2,
    found by the host's own collection: no rank, no torchrun, no run directory."""
    proc = run_suite(tmp_path, *small_run("no_case_is_called_this or (all_reduce and 3B)"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr == (
        "error: the case selection (K= / -k 'no_case_is_called_this or (all_reduce and 3B)') matches no case of "
        "collectives at 2 ranks; nothing started\n"
    )
    assert not (tmp_path / "results").exists() and "# run " not in proc.stdout  # no rank started
    # a selection that matches (pytest's expression, a marker too) starts the run as before
    proc = run_suite(tmp_path, *small_run("all_reduce-sum and 1024B"), "-m", "not slow", run_id="ok")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [b["extra_info"]["size_bytes"] for b in load_bench(tmp_path, "ok")["benchmarks"]] == [1024]


# The launcher's own failures (issue 27): whatever goes wrong around the ranks ends in one line
# naming the cause and its status, never a traceback, and the measured cases stay valid and marked.

FEW = ["--experiments", "collectives", "--min-bytes", "256", "--max-bytes", "1K", "--iters", "3", "--warmup", "1"]


def _run_limited(tmp_path, *args, fsize=None, nproc=2, env=None, timeout=180):
    """``python -m suite.launch`` under a file-size limit of ``fsize`` bytes (``ulimit -f``), if given."""

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    e = {**os.environ, "SUITE_REPORT": "0", **(env or {})}
    return subprocess.run(
        launch_command(tmp_path, *args, nproc=nproc),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=e,
        preexec_fn=limit if fsize is not None else None,
    )


def _no_traceback(proc):
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]


def _marked(tmp_path, status, n_at_least):
    run = _bench(tmp_path)
    assert run is not None, "the measured cases were lost"
    assert run["suite"]["complete"] is False and run["suite"]["exit_status"] == status, run["suite"]
    assert len(run["benchmarks"]) >= n_at_least and all_correct([b["extra_info"] for b in run["benchmarks"]])
    return run


def test_results_that_cannot_be_written_mid_run_exit_10_and_keep_the_cases(tmp_path):
    # rank 0 hits a real file-size limit (EFBIG, as a full disk's ENOSPC) rewriting bench.json after case 3
    proc = _run_limited(tmp_path, *FEW, "--", "-p", "tests.plants.results_file_limit", "-k", "all_reduce")
    bench = tmp_path / "results" / "run" / "bench.json"
    line = f"cannot write {bench}: File too large"
    assert proc.returncode == 10, proc.stderr[-4000:]
    assert "# failure on rank 0 (" in proc.stderr and line in proc.stderr, proc.stderr[-4000:]
    _no_traceback(proc)
    run = _marked(tmp_path, 10, 3)
    assert len(run["benchmarks"]) == 3 and line in run["suite"]["cause"]
    assert proc.stderr.rstrip().splitlines()[-1].startswith("# exit status 10 (the run's files could not be")


def test_bench_json_the_launcher_cannot_rewrite_exit_10_with_the_ranks_file_intact(tmp_path):
    # the launcher (not the ranks) is under an 8 KiB file limit: config.json fits, its rewrite of bench.json not
    proc = _run_limited(
        tmp_path, *FEW, "--", "-p", "tests.plants.ranks_without_file_limit", "-k", "all_reduce-sum", fsize=8192
    )
    bench = tmp_path / "results" / "run" / "bench.json"
    assert proc.returncode == 10, proc.stderr[-4000:]
    assert f"# error: cannot write {bench}: File too large; {bench} is as the ranks left it" in proc.stderr
    _no_traceback(proc)
    run = json.loads(bench.read_text())  # the ranks' complete file, without the launcher's stamp
    assert run["suite"]["complete"] is True and len(run["benchmarks"]) == 2 and "exit_status" not in run["suite"]


def test_a_run_directory_that_cannot_be_written_exit_10_before_any_rank(tmp_path):
    proc = _run_limited(tmp_path, *FEW, fsize=100)  # config.json (about 1 KB) does not fit
    config = tmp_path / "results" / "run" / "config.json"
    assert proc.returncode == 10, proc.stderr[-3000:]
    assert proc.stderr.strip() == f"error: cannot write {config}: File too large; nothing started"
    assert "# run " not in proc.stdout


def test_a_run_id_that_is_a_file_exit_2(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "run").write_text("not a run\n")
    proc = _run_limited(tmp_path, *FEW)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip() == (
        f"error: RUN_ID 'run': {tmp_path / 'results' / 'run'} exists and is not a directory; choose another RUN_ID"
    )


def test_a_leftover_run_directory_is_not_read_as_this_run_exit_2(tmp_path):
    # a run killed before its first case left its failure notes: a new run must not report them as its own
    notes = tmp_path / "results" / "run" / "failures"
    notes.mkdir(parents=True)
    (notes / "rank1.json").write_text(json.dumps({"rank": 1, "host": "h", "cause": "old", "kind": "peer_failure"}))
    proc = _run_limited(tmp_path, *FEW)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip() == (
        f"error: {tmp_path / 'results' / 'run'} already holds a run (failures); "
        "choose another RUN_ID or remove that directory"
    )
    assert "# run " not in proc.stdout


def _mid_run(tmp_path):
    """A run of 2 ranks started, once its first case is in bench.json: (the launcher, bench.json)."""
    cmd = launch_command(tmp_path, *FEW[:-4], "--iters", "20", "--warmup", "1", "--", "-k", "all_reduce")
    env = {**os.environ, "SUITE_REPORT": "0"}
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    bench = tmp_path / "results" / "run" / "bench.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not bench.exists():
        time.sleep(0.2)
    assert bench.exists(), "no case finished in time"
    return proc, bench


def test_torchrun_killed_ends_its_ranks_exit_5(tmp_path):
    proc, _ = _mid_run(tmp_path)
    (torchrun,) = psutil.Process(proc.pid).children()  # the OOM killer's choice, or a kill -9
    torchrun.kill()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5, err[-3000:]
    assert "# error: torchrun died of SIGKILL; the ranks it started were ended" in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    time.sleep(0.5)
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert leftover == [], f"processes left behind: {leftover}"
    run = _marked(tmp_path, 5, 1)
    assert run["suite"]["cause"] == "error: torchrun died of SIGKILL; the ranks it started were ended"


@pytest.mark.parametrize(
    ("switch", "spec", "says"),
    [
        ("CORRUPTION", "flop:all_reduce", "unknown fault 'flop' (choose from flip, misroute)"),
        ("CORRUPTION", "all_reduce@timd", "unknown phase @timd"),
        ("CORRUPTION", "misroute:", "names no case"),
        # these two started the ranks before suite/common/faults.py: a bad action raised on every rank mid-run,
        # and a rank the run does not have planted nothing, so a test read a clean run as the fault's outcome
        ("FAULT", "boom:1:3", "unknown action 'boom' (choose from kill, term, stop, exit, raise)"),
        ("DELAY", "2:0.5:all_reduce", "rank 2 is not a rank of this run (0..1)"),
    ],
)
def test_a_bad_fault_switch_exit_2_before_any_rank(tmp_path, switch, spec, says):
    proc = _run_limited(tmp_path, *FEW, env={f"SUITE_INJECT_{switch}": spec})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"error: SUITE_INJECT_{switch}={spec!r}: ")
    assert says in proc.stderr
    assert not (tmp_path / "results").exists()


_SLOW_REPORT = (
    # Python's own SIGINT handler, as in a terminal: a test run started in the background (`make test &`)
    # has SIGINT ignored, and that is inherited
    "import runpy, signal, time, suite.report.cli as r; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "REPORT_STARTS = '# test: the report starts'; "
    "w = r.write_report; "
    "r.write_report = lambda *a, **k: (print(REPORT_STARTS, flush=True), time.sleep(60), w(*a, **k))[2]; "
    "runpy.run_module('suite.launch.cli', run_name='__main__', alter_sys=True)"
)
"""``python -m suite.launch`` whose report first says so, then sleeps a minute (a Ctrl-C ends the sleep)."""


def test_ctrl_c_while_the_report_is_written_one_line_exit_130(tmp_path):
    # after the ranks ended no handler forwards SIGINT: the launcher itself must say what it means
    # The launcher as users run it, its report held for a minute (it takes about a second here, so a
    # Ctrl-C sent on a line printed after it would land after it): the interrupt always lands in the report.
    cmd = [*launch_command(tmp_path, *FEW, "--", "-k", "all_reduce-sum")]
    assert cmd[1:3] == ["-m", "suite.launch"]
    cmd[1:3] = ["-c", _SLOW_REPORT]
    env = {**os.environ, "SUITE_REPORT": "1"}
    with open(tmp_path / "stderr.txt", "w+") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        for line in proc.stdout:
            if line.startswith("# test: the report starts"):
                proc.send_signal(signal.SIGINT)
                break
        proc.stdout.read()
        proc.wait(timeout=60)
        err.seek(0)
        stderr = err.read()
    run_dir = tmp_path / "results" / "run"
    assert proc.returncode == 130, stderr[-3000:]
    assert f"# interrupted by SIGINT after the ranks ended: {run_dir / 'bench.json'} has their results" in stderr
    assert "Traceback" not in stderr, stderr[-3000:]
    run = _bench(tmp_path)
    assert run["suite"]["complete"] is True and len(run["benchmarks"]) == 2


def test_sigterm_between_cases_is_one_line_exit_143(tmp_path):
    # a batch system's SIGTERM: forwarded to the ranks, torchrun's own SignalException traceback held back
    proc, bench = _mid_run(tmp_path)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    run = _marked(tmp_path, 143, 1)
    n, saved_in = len(run["benchmarks"]), re.escape(str(bench))
    line = re.search(
        rf"^# (interrupted (?:in|after) collectives\[all_reduce-\S+\], {n} cases? saved in {saved_in} \(SIGTERM\))$",
        err,
        re.M,
    )
    assert line, err[-3000:]
    assert run["suite"]["interrupted_by_signal"] == signal.SIGTERM and run["suite"]["cause"] == line.group(1)


def test_torchrun_that_cannot_start_the_ranks_is_named(tmp_path):
    # torchrun reads PET_<OPTION> as its own options: an unusable one stops it before any rank starts
    proc = _run_limited(tmp_path, *FEW, env={"PET_MAX_RESTARTS": "x"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "# error: torchrun exited with status 2 and no rank named a cause" in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.rstrip().splitlines()[-1].startswith("# exit status 1 (a case or the launch failed)")
    _no_traceback(proc)
    assert not (tmp_path / "results" / "run" / "bench.json").exists()
