"""The point-to-point experiment: every pattern on real Gloo groups (world 2 and 3) through the
launcher, exact payload checks, the isolated deadlock demonstration, planted corruption, and the
pure logic of its tables."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from experiments import p2p
from suite import deadlock
from suite.config import build_config
from suite.dist import DistContext
from suite.results import REQUIRED_FIELDS
from suite.tables.p2p import bubble_fit, format_tables, measured_bubble
from tests.conftest import ROOT, load_bench, run_suite

TINY = ["--experiments", "p2p", "--iters", "3", "--warmup", "1"]

EXPECTED_VARIANTS = {
    "pingpong": {"send_recv"}, "pair_matrix": {"send_recv"}, "window": {"unidirectional", "bidirectional"},
    "ring": set(p2p.RING_VARIANTS), "exchange": set(p2p.EXCHANGE_VARIANTS), "pipeline": {"send_recv"},
    "producer": set(p2p.PRODUCER_VARIANTS), "control": set(p2p.CONTROL_VARIANTS),
    "barrier_cost": {"no_barrier", "barrier_each_step"}, "batching": set(p2p.BATCHING_VARIANTS),
}


# --- pure logic -----------------------------------------------------------------------------------

def test_bubble_fit_recovers_an_ideal_pipeline():
    # S = 4 stages of 10 us each: T(M) = (M + S - 1) * 10, so the bubble is the ideal (S-1)/(M+S-1).
    pts = [(m, (m + 3) * 10.0) for m in (1, 2, 4, 8)]
    slope, icpt = bubble_fit(pts)
    assert slope == pytest.approx(10.0) and icpt == pytest.approx(30.0)
    for m, t in pts:
        assert measured_bubble(m, t, slope) == pytest.approx(3 / (m + 3))


def test_bubble_fit_single_point_has_no_fill_drain():
    assert bubble_fit([(4, 40.0)]) == (10.0, 0.0)
    with pytest.raises(ValueError):
        bubble_fit([])


@pytest.mark.parametrize("world", [2, 3, 4])
def test_cases_cover_every_pattern_and_are_unique(world):
    cfg = build_config(min_bytes="1K", max_bytes="1M", step_factor="4")
    cases = p2p.cases(cfg, world)
    ids = [c.label for c in cases]
    assert len(ids) == len(set(ids))
    assert {c.identity["pattern"] for c in cases} == set(p2p.PATTERNS)
    assert all(max(c.identity["src"], c.identity["dst"]) < world for c in cases)
    assert all(c.experiment == "p2p" and c.mode == "blocking" for c in cases)
    pairs = {(c.identity["src"], c.identity["dst"]) for c in cases if c.identity["pattern"] == "pair_matrix"}
    assert pairs == {(a, b) for a in range(world) for b in range(world) if a != b}
    assert {c.bytes.size_bytes for c in cases if c.identity["pattern"] == "pair_matrix"} == {1 << 10, 1 << 20}
    # only the barrier has nothing to check, and says why
    assert [c.label for c in cases if c.unchecked] == ["control-barrier"]
    # world 1: one case that says why nothing runs (not an empty parameter set)
    alone = p2p.cases(cfg, 1)
    assert [c.label for c in alone] == ["p2p"] and "at least 2 ranks" in alone[0].skip(None, cfg)


def test_import_needs_no_pytest():
    code = "import sys, experiments.p2p, suite.deadlock; assert 'pytest' not in sys.modules"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


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


def _rec(**kw) -> dict:
    base = {"experiment": "p2p", "op": "send_recv", "backend": "gloo", "device": "cpu", "dtype": "float32",
            "world_size": 3, "iterations": 5, "n_wrong": 0, "algbw_gbps": 1.0, "busbw_gbps": 1.0}
    return base | kw


def test_cross_node_pairs_and_slow_links_are_marked():
    # ranks 0 and 1 share a host, rank 2 is on another: as ctx.node_of() decides it
    ctx = DistContext(rank=0, world_size=3, local_rank=0, local_world_size=2, backend="gloo",
                      device=torch.device("cpu"), group=None, timeout_s=1.0, hostnames=["a", "a", "b"])
    assert [p2p._cross(ctx, 0, b) for b in (1, 2)] == [False, True]
    recs = [_rec(pattern="pair_matrix", variant="send_recv", size_bytes=64, src=a, dst=b,
                 cross_node=p2p._cross(ctx, a, b), time_us=500.0 if (a, b) == (2, 0) else 100.0)
            for a in range(3) for b in range(3) if a != b]
    recs += [_rec(pattern="pingpong", variant="send_recv", size_bytes=64, src=0, dst=b, time_us=10.0,
                  cross_node=p2p._cross(ctx, 0, b)) for b in (1, 2)]
    text = format_tables(recs)
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("       ")}
    assert "500.0*!" in rows["2"]  # cross-node and > 1.5x the median
    assert "100.0*" in rows["0"] and "100.0  " in rows["0"]  # 0->2 cross-node, 0->1 not
    assert "0<->2 x" in text and "0<->1 x" not in text


@pytest.mark.slow
def test_probe_pair_that_cannot_start_reports_an_error_and_leaves_no_process():
    # An unknown backend makes the pair die during start-up: reported (not hung), retried once,
    # both processes gone.
    res = deadlock.run_deadlock_probe("nosuchbackend", "cpu")
    assert res.error and res.error.startswith(deadlock._START_FAILED)
    assert res.blocked_from_bytes is None and set(res.correct_orderings.values()) == {"not run"}
    assert res.elapsed_s < deadlock.PROBE.total_limit_s
    assert _no_probe_children_left()
