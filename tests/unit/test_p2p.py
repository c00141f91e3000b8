"""The point-to-point experiment's pure logic: its declared cases and its tables (the runs on real
Gloo groups are tests/dist/test_p2p.py)."""

from __future__ import annotations


import pytest
import torch

from experiments import p2p
from suite.config import build_config
from suite.dist import DistContext
from suite.tables.p2p import bubble_fit, format_tables, measured_bubble

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


