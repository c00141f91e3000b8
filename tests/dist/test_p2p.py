"""The point-to-point experiment on real Gloo groups (world 2 and 3) through the launcher: every
pattern, exact payload checks, the isolated deadlock demonstration, planted corruption."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from experiments import p2p
from suite import deadlock
from suite.results import REQUIRED_FIELDS
from suite.tables.p2p import format_tables
from tests.conftest import ROOT, load_bench, run_suite
from tests.unit.test_p2p import EXPECTED_VARIANTS, TINY


# --- real Gloo groups through the launcher ---------------------------------------------------------

def _no_probe_children_left() -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if b"--deadlock-child" in fh.read():
                        return False
            except OSError:
                pass
    return True


def _check_run(tmp_path, proc, world):
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
        if r["op"] == "send_recv":  # busbw factor 1
            assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"])
        by.setdefault(r["pattern"], set()).add(r["variant"])
    assert by == EXPECTED_VARIANTS
    # ping-pong: rank 0 to every peer, one-way latency, peers recorded, one host
    pp = [r for r in recs if r["pattern"] == "pingpong"]
    assert {r["dst"] for r in pp} == set(range(1, world)) and all(r["src"] == 0 for r in pp)
    assert all(r["time_divisor"] == 2 and "round-trip time / 2" in r["latency_definition"] for r in pp)
    assert all(r["cross_node"] is False and r["peer"] == r["dst"] for r in pp)
    pm = {(r["src"], r["dst"]) for r in recs if r["pattern"] == "pair_matrix"}
    assert pm == {(a, b) for a in range(world) for b in range(world) if a != b}
    # pipeline: S = world stages, ideal bubble recorded
    pl = [r for r in recs if r["pattern"] == "pipeline"]
    assert {r["microbatches"] for r in pl} == set(p2p.MICROBATCHES)
    for r in pl:
        assert r["stages"] == world
        assert r["ideal_bubble"] == pytest.approx((world - 1) / (r["microbatches"] + world - 1))
    # the deadlock demonstration: Gloo's blocking send waits for the receiver, so both-send-first
    # hangs already at the smallest size; it is detected within the bound and the pair is killed,
    # while the correct orderings complete.
    ex = [r for r in recs if r["pattern"] == "exchange"]
    for r in ex:
        assert r["deadlock_error"] is None
        assert r["deadlock_backend"] == "gloo"
        assert r["deadlock_blocked_from_bytes"] == r["deadlock_sizes_probed"][-1]
        assert r["deadlock_completed_bytes"] == [s for s in r["deadlock_sizes_probed"]
                                                 if s < r["deadlock_blocked_from_bytes"]]
        assert r["deadlock_killed"] is True
        bound = r["deadlock_hang_bound_s"]
        assert bound <= r["deadlock_detected_after_s"] < bound + 2.0
        assert r["deadlock_elapsed_s"] < deadlock.PROBE.total_limit_s + 5
        assert set(r["deadlock_correct_orderings"].values()) == {"completed"}
        assert r["size_bytes"] >= r["deadlock_blocked_from_bytes"]
    assert _no_probe_children_left()
    for title in ("# p2p ping-pong", "# p2p pair matrix", "# p2p window", "# p2p ring",
                  "# p2p deadlock demonstration", "BLOCKED from", "# p2p pipeline", "# p2p producer",
                  "# p2p control messages", "# p2p barrier cost", "# p2p batching"):
        assert title in proc.stdout, title
    assert format_tables(recs) in proc.stdout
    return recs


@pytest.mark.slow
def test_every_case_world2(tmp_path):
    proc = run_suite(tmp_path, *TINY, "--min-bytes", "64", "--max-bytes", "256", "--step-factor", "4",
                     nproc=2, timeout=300)
    recs = _check_run(tmp_path, proc, 2)
    assert {r["size_bytes"] for r in recs if r["pattern"] == "pingpong"} == {64, 256}


@pytest.mark.slow
def test_every_case_world3(tmp_path):
    proc = run_suite(tmp_path, *TINY, "--min-bytes", "128", "--max-bytes", "128", "--dtypes", "int64",
                     nproc=3, timeout=300)
    recs = _check_run(tmp_path, proc, 3)
    assert {r["dtype"] for r in recs if r["pattern"] != "control"} == {"int64"}
    # an odd ring: parity ordering must still complete (ranks 2 and 0 are both even)
    assert any(r["pattern"] == "ring" and r["variant"] == "send_recv_parity" for r in recs)


@pytest.mark.slow
def test_corrupted_payload_is_detected_in_every_case(tmp_path):
    # Every case but the (slow, isolated) deadlock pair, with one received element flipped.
    proc = run_suite(tmp_path, *TINY, "--min-bytes", "64", "--max-bytes", "64", "--", "-k", "not exchange",
                     nproc=2, env={"SUITE_INJECT_CORRUPTION": "p2p"}, timeout=300)
    assert proc.returncode == 6, proc.stdout[-2000:]  # EXIT_WRONG_RESULT
    assert "wrong element" in proc.stdout + proc.stderr
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    assert {r["pattern"] for r in recs} == set(p2p.PATTERNS) - {"exchange"}
    for r in recs:
        if r["op"] == "barrier":  # carries no payload: nothing to check, so nothing to corrupt
            assert r["checked"] is False and r["n_wrong"] is None
        else:
            assert r["n_wrong"] >= 1, r["label"]
    assert "[FAILED]" in proc.stdout


@pytest.mark.slow
def test_probe_pair_that_cannot_start_reports_an_error_and_leaves_no_process():
    # An unknown backend makes the pair die during start-up: reported (not hung), retried once,
    # both processes gone.
    res = deadlock.run_deadlock_probe("nosuchbackend", "cpu")
    assert res.error and res.error.startswith(deadlock._START_FAILED)
    assert res.blocked_from_bytes is None and set(res.correct_orderings.values()) == {"not run"}
    assert res.elapsed_s < deadlock.PROBE.total_limit_s
    assert _no_probe_children_left()
