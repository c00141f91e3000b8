"""The point-to-point experiment on real Gloo groups (world 2 and 3) through the launcher: every
pattern, exact payload checks, the isolated deadlock demonstration, planted corruption."""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from suite.ops import p2p
from suite.ops.p2p import pingpong
from suite.ops.p2p import deadlock
from suite.results import REQUIRED_FIELDS
from experiments.p2p.table import format_tables
from tests.conftest import load_bench, run_suite, tables_of
from tests.helpers.p2p import EXPECTED_VARIANTS, TINY


# --- real Gloo groups through the launcher ---------------------------------------------------------


def _no_probe_children_left() -> bool:
    """No process of a probe pair this process started is left. Pairs of other runs on the machine (another
    checkout's tests, a benchmark) are not ours: only children of this process count."""
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    cmd = fh.read()
                with open(f"/proc/{pid}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])  # "pid (comm) state ppid ..."
            except (OSError, IndexError, ValueError):
                continue
            if b"--deadlock-child" in cmd and ppid == me:
                return False
    return True


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


@pytest.mark.slow
def test_the_leftover_check_sees_our_probe_process_and_not_another_runs():
    # Found when two checkouts ran this file at once: each saw the other's pair and failed.
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)", "--deadlock-child"]
    foreign = int(
        subprocess.run(
            ["sh", "-c", f"{shlex.join(sleeper)} >/dev/null 2>&1 & echo $!"], capture_output=True, text=True
        ).stdout
    )  # started by a shell that has exited: not a child of this process
    own = subprocess.Popen(sleeper)
    try:
        for _ in range(200):  # until both have exec'd python (bounded; no time is asserted)
            if all(b"--deadlock-child" in _cmdline(p) for p in (foreign, own.pid)):
                break
            time.sleep(0.05)
        assert b"--deadlock-child" in _cmdline(foreign)
        assert not _no_probe_children_left()  # our own probe process is seen
        own.kill()
        own.wait()
        assert _no_probe_children_left()  # another run's is not
    finally:
        own.kill()
        own.wait()
        os.kill(foreign, signal.SIGKILL)


def _check_run(tmp_path, proc, world, exchange=True):
    """A clean run's records and tables; ``exchange``: the run had the exchange case, and so the deadlock probe."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    run = load_bench(tmp_path)
    assert run["suite"]["complete"] is True
    recs = [b["extra_info"] for b in run["benchmarks"]]
    by = {}
    for r in recs:
        for f in REQUIRED_FIELDS:
            assert f in r, f"{f} missing in {r['label']}"
        assert r["experiment"] == "p2p" and r["world_size"] == world
        if r["op"] == "barrier":  # carries no payload: unchecked, with the reason (never a silent 0)
            assert r["checked"] is False and r["n_wrong"] is None and r["unchecked_reason"]
        else:
            assert r["checked"] is True and r["n_wrong"] == 0
        assert r["timing_mode"] == "blocking" and r["iterations"] == 3
        assert r["time_us"] > 0 and r["time_divisor"] >= 1 and r["iteration"]
        if r["op"] == "send_recv" and r["pattern"] != "producer":  # busbw factor 1
            assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"])
        if r["size_bytes"]:  # one direction's bytes over the recorded time, in every pattern
            assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / r["time_us"] / 1e3)
        if r["pattern"] == "window":  # both ways at once: algbw one direction, the sum named apart
            bi = r["variant"] == "bidirectional"
            assert r["time_divisor"] == r["window"] and ("aggregate_algbw_gbps" in r) is bi
            if bi:
                assert r["aggregate_algbw_gbps"] == pytest.approx(2 * r["algbw_gbps"])
                assert r["provenance"]["aggregate_algbw_gbps"].startswith("derived: 2 x size_bytes / time_us")
        by.setdefault(r["pattern"], set()).add(r["variant"])
    assert by == {p: v for p, v in EXPECTED_VARIANTS.items() if exchange or p != "exchange"}
    # ping-pong: rank 0 to every peer, one-way latency, peers recorded, one host
    pp = [r for r in recs if r["pattern"] == "pingpong"]
    assert {r["dst"] for r in pp} == set(range(1, world)) and all(r["src"] == 0 for r in pp)
    # OSU-style: K >= the floor back-to-back round trips per sample, one-way = sample / (2K)
    for r in pp + [r for r in recs if r["pattern"] == "pair_matrix"]:
        k = r["round_trips_per_sample"]
        assert pingpong.PINGPONG_MIN_ROUND_TRIPS <= k <= pingpong.PINGPONG_MAX_ROUND_TRIPS
        assert r["time_divisor"] == 2 * k and r["latency_formula"] == "sample / (2K)"
        assert r["provenance"]["time_us"].startswith("derived: sample / (2K)")
        assert r["calibration_sample_us"] > 0 and r["min_sample_us"] == pingpong.PINGPONG_MIN_SAMPLE_S * 1e6
    # producer: the collectives' whole-buffer S and bus factors
    n = world
    for r in recs:
        if r["pattern"] == "producer":
            scat = r["variant"] in ("scatter", "isend_each_distinct")
            assert r["busbw_factor"] == pytest.approx((n - 1) / n if scat else 1.0)
            assert r["consumer_bytes"] == (r["size_bytes"] // n if scat else r["size_bytes"])
    assert all(r["cross_node"] is False and r["peer"] == r["dst"] for r in pp)
    pm = {(r["src"], r["dst"]) for r in recs if r["pattern"] == "pair_matrix"}
    assert pm == {(a, b) for a in range(world) for b in range(world) if a != b}
    # the pipeline is model_parallel's (stages that compute, bubble against the schedule's model)
    assert not [r for r in recs if r["pattern"] == "pipeline"]
    if exchange:
        _check_exchange([r for r in recs if r["pattern"] == "exchange"])
    assert _no_probe_children_left()
    for title in (
        "# p2p ping-pong",
        "# p2p pair matrix",
        "# p2p window",
        "# p2p ring",
        *(("# p2p deadlock demonstration", "BLOCKED from") if exchange else ()),
        "# p2p producer",
        "# p2p control messages",
        "# p2p barrier cost",
        "# p2p batching",
    ):
        assert title in tables_of(proc), title
    assert format_tables(recs) in tables_of(proc)  # the tables file holds them as the terminal did
    return recs


def _check_exchange(ex):
    """The exchange records: the isolated deadlock probe's findings with them."""
    # the deadlock demonstration: Gloo's blocking send waits for the receiver, so both-send-first
    # hangs already at the smallest size; it is detected within the bound and the pair is killed,
    # while the correct orderings complete.
    assert ex
    for r in ex:
        assert r["deadlock_error"] is None
        assert r["deadlock_backend"] == "gloo"
        assert r["deadlock_blocked_from_bytes"] == r["deadlock_sizes_probed"][-1]
        assert r["deadlock_completed_bytes"] == [
            s for s in r["deadlock_sizes_probed"] if s < r["deadlock_blocked_from_bytes"]
        ]
        assert r["deadlock_killed"] is True
        within, watched = r["deadlock_no_progress_within_s"], r["deadlock_no_progress_for_s"]
        assert within >= deadlock.PROBE.floor_s
        assert within * r["deadlock_blocked_factor"] <= watched < within * r["deadlock_blocked_factor"] + 2.0
        assert r["deadlock_rate_source"].startswith("measured")
        assert r["deadlock_elapsed_s"] < deadlock.PROBE.total_limit_s + 5
        # a correct ordering may be slow on a loaded host, never blocked
        assert set(r["deadlock_correct_orderings"].values()) <= {"completed", "slow"}
        assert r["size_bytes"] >= r["deadlock_blocked_from_bytes"]
        for k in (
            "deadlock_elapsed_s",
            "deadlock_no_progress_for_s",
            "deadlock_blocked_from_bytes",
            "deadlock_correct_orderings_bytes",
        ):  # measured in the isolated pair, and says so
            assert r["provenance"][k] == deadlock.PROVENANCE[k] and r["provenance"][k].split(":")[0] in (
                "measured",
                "derived",
            ), k


@pytest.mark.slow
def test_every_case_world2(tmp_path):
    # every case but the exchange: its isolated deadlock probe (a pair of processes, ~10 s) is the same pair at
    # any world; the 3-rank run has it, with a rank that waits through it
    proc = run_suite(
        tmp_path,
        *TINY,
        "--min-bytes",
        "64",
        "--max-bytes",
        "256",
        "--step-factor",
        "4",
        "--",
        "-k",
        "not exchange",
        nproc=2,
        timeout=300,
    )
    recs = _check_run(tmp_path, proc, 2, exchange=False)
    assert {r["size_bytes"] for r in recs if r["pattern"] == "pingpong"} == {64, 256}


@pytest.mark.slow
def test_every_case_world3(tmp_path):
    proc = run_suite(
        tmp_path, *TINY, "--min-bytes", "128", "--max-bytes", "128", "--dtypes", "int64", nproc=3, timeout=300
    )
    recs = _check_run(tmp_path, proc, 3)
    assert {r["dtype"] for r in recs if r["pattern"] != "control"} == {"int64"}
    # an odd ring: parity ordering must still complete (ranks 2 and 0 are both even)
    assert any(r["pattern"] == "ring" and r["variant"] == "send_recv_parity" for r in recs)


@pytest.mark.slow
def test_corrupted_payload_is_detected_in_every_case(tmp_path):
    # Every case but the (slow, isolated) deadlock pair, with one received element flipped.
    proc = run_suite(
        tmp_path,
        *TINY,
        "--min-bytes",
        "64",
        "--max-bytes",
        "64",
        "--",
        "-k",
        "not exchange",
        nproc=2,
        env={"SUITE_INJECT_CORRUPTION": "p2p"},
        timeout=300,
    )
    assert proc.returncode == 6, proc.stdout[-2000:]  # EXIT_WRONG_RESULT
    assert "wrong element" in proc.stdout + proc.stderr
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    assert {r["pattern"] for r in recs} == set(p2p.PATTERNS) - {"exchange"}
    for r in recs:
        if r["op"] == "barrier":  # carries no payload: nothing to check, so nothing to corrupt
            assert r["checked"] is False and r["n_wrong"] is None
        else:
            assert r["n_wrong"] >= 1, r["label"]
    assert "[FAILED]" in tables_of(proc)


@pytest.mark.slow
def test_probe_pair_that_cannot_start_reports_an_error_and_leaves_no_process():
    # An unknown backend makes the pair die during start-up: reported (not hung), retried once,
    # both processes gone.
    res = deadlock.run_deadlock_probe("nosuchbackend", "cpu")
    assert res.error and res.error.startswith(deadlock._START_FAILED)
    assert res.blocked_from_bytes is None and set(res.correct_orderings.values()) == {"not run"}
    assert res.elapsed_s < deadlock.PROBE.total_limit_s
    assert _no_probe_children_left()


@pytest.mark.slow
def test_pair_records_time_only_the_ranks_that_take_part(tmp_path):
    # 3 ranks; rank 1 reaches each timed sample of the ping-pong and window cases D late (after the
    # barrier, before its op call). Ping-pong's per-rank fields are the initiator's clock (OSU
    # osu_latency times rank src), a window's cover its pair: a rank that takes no part is in neither.
    d = 0.2
    proc = run_suite(
        tmp_path,
        *TINY,
        "--min-bytes",
        "64",
        "--max-bytes",
        "64",
        "--",
        "-k",
        "pingpong or window",
        nproc=3,
        env={"SUITE_INJECT_DELAY": f"1:{d}@before"},
        timeout=300,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    got = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    recs = {(r["pattern"], r["variant"], r["dst"]): r for r in got}
    assert set(recs) == {
        ("pingpong", "send_recv", 1),
        ("pingpong", "send_recv", 2),
        ("window", "unidirectional", 2),
        ("window", "bidirectional", 2),
    }
    for (pattern, _, dst), r in recs.items():
        assert r["group_ranks"] == ([0] if pattern == "pingpong" else [0, dst]), r["label"]
        assert len(r["rank_median_us"]) == len(r["group_ranks"])
        assert ("initiator" if pattern == "pingpong" else "takes part") in r["provenance"]["rank_median_us"]
    # 0 <-> 1: the initiator's clock holds its late peer, once per sample of K back-to-back round
    # trips (between D/(2K) and D/8: no barrier between the round trips), and nothing else is timed
    near = recs[("pingpong", "send_recv", 1)]
    k = near["round_trips_per_sample"]
    assert k >= pingpong.PINGPONG_MIN_ROUND_TRIPS and near["time_divisor"] == 2 * k
    assert d / (2 * k) * 0.99 <= near["rank_median_us"][0] * 1e-6 < d / 8, near["rank_median_us"]
    assert "last_done_rank" not in near and "late_arrival_rank" not in near  # one rank timed: nothing to rank
    # rank 1 takes no part in 0 <-> 2 or in the 0 -> 2 windows: its D per sample is in no per-rank field
    for key in (("pingpong", "send_recv", 2), ("window", "unidirectional", 2), ("window", "bidirectional", 2)):
        r = recs[key]
        assert r["rank_spread_us"]["max"] * 1e-6 < d / r["time_divisor"] / 2, (key, r["rank_median_us"])


@pytest.mark.slow
def test_deadlock_probe_tells_a_slow_step_from_a_blocked_one():
    # Real Gloo pair. A delayed peer (process 1 sleeps 3 s before the isend/irecv exchange) makes
    # that step late past its bound T (1 s floor at 1 KiB) but it completes: slow, not blocked,
    # and the probe goes on. Both-send-first never progresses: blocked, the pair killed.
    pr = dataclasses.replace(
        deadlock.PROBE, sizes=(4, 1024), floor_s=1.0, blocked_factor=6.0, delay_step="isend_irecv", delay_s=3.0
    )
    res = deadlock.run_deadlock_probe("gloo", "cpu", pr)
    assert res.error is None, res.error
    by = {(e["step"], e["bytes"]): e for e in res.steps}
    late = by[("isend_irecv", 1024)]
    # took_s is from the parent's clock, which sees the previous step a little after process 1 does
    assert late["outcome"] == "slow" and late["bound_s"] == 1.0 and 2.5 <= late["took_s"] < 6.0
    assert res.correct_orderings["isend_irecv"] == "slow" and "isend_irecv@1024" in res.slow_steps
    assert {res.correct_orderings[o] for o in ("send_recv_parity", "batch_isend_irecv")} <= {"completed", "slow"}
    blocked = by[("naive", 4)]
    assert blocked["outcome"] == "blocked" and blocked["took_s"] >= 6.0 * blocked["bound_s"]
    assert res.blocked_from_bytes == 4 and res.no_progress_within_s == 1.0 and res.killed
    assert res.no_progress_for_s >= 6.0
    assert _no_probe_children_left()
