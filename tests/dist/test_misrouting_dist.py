"""Misrouted data fails the check: every collective, every p2p pattern, the hand-written ring and
reduce+broadcast all_reduce and the hierarchical all_reduce, at 3 Gloo ranks on 2 simulated nodes (an
uneven split: 2 ranks and 1), through the launcher, with the suite's misroute fault
(SUITE_INJECT_CORRUPTION=misroute:all: the right values in the wrong place — chunks or messages each take the
next one's place, or an output turns by one chunk: the planted faulty backend's misroute class, which proves the
same checks at 2, 3 and 4 ranks, in one process group per world size (tests/dist/test_fault_catalogue_dist.py);
this run adds the launcher, the suite's own fault switch and the hierarchical all_reduce.

The sizes are powers of two: with the old patterns (period 8 in the index and in the rank) every
chunk of a multiple of 8 elements was the same, and most of these cases passed as #wrong 0.
"""

import pytest

from suite.ops.p2p import PATTERNS
from suite.ops.collectives import REGISTRY
from tests.conftest import load_bench, run_suite
from tests.helpers.misrouting import ONE_ELEMENT

pytestmark = pytest.mark.slow


def test_misrouted_data_fails_every_case(tmp_path):
    world = 3
    proc = run_suite(
        tmp_path,
        "--experiments", "collectives,p2p,backends,placement", "--min-bytes", "256", "--max-bytes", "256",
        "--iters", "2", "--warmup", "1", "--dtypes", "float32",
        "--", "-k", "not exchange and (collectives or p2p or algorithm or hierarchical)",
        nproc=world, timeout=600,
        env={"SUITE_INJECT_CORRUPTION": "misroute:all", "SUITE_FAKE_NODES": "2"},
    )  # fmt: skip
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]  # EXIT_WRONG_RESULT
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    missed = [
        r["label"] for r in recs if r["checked"] and not r["n_wrong"] and (r["label"] not in ONE_ELEMENT)
    ]  # fmt: skip
    assert not missed, f"misrouted data passed the check at {world} ranks: {missed}"
    ran = {(r["experiment"], r.get("pattern") or r.get("algorithm") or r.get("variant")) for r in recs}
    gloo_has = {c.variant for c in REGISTRY} - {"barrier"}
    assert {v for e, v in ran if e == "collectives"} >= gloo_has - {"all_gather_into_tensor", "reduce_scatter_tensor"}
    assert {v for e, v in ran if e == "p2p"} == set(PATTERNS) - {"exchange"}
    assert {v for e, v in ran if e == "backends"} >= {"ring_p2p", "reduce_broadcast", "all_reduce"}
    # hierarchical_all_reduce on 2 simulated nodes
    hier = [r for r in recs if r["experiment"] == "placement" and r["algorithm"] != "flat"]
    assert [r["algorithm"] for r in hier] == ["hierarchical"]
    assert all(r["n_wrong"] for r in hier)
    assert all(r["n_wrong"] for r in recs if r["label"] == "control-ready_go")


def test_ring_all_reduce_sending_the_wrong_chunk_fails_at_2_ranks(tmp_path):
    """The review's planted ring bug (reduce-scatter sends chunk me-s+1), loaded into both ranks as a
    plugin: the ring's record is wrong, the backend's own all_reduce beside it is right."""
    proc = run_suite(
        tmp_path, "--experiments", "backends", "--min-bytes", "1K", "--max-bytes", "4K", "--iters", "2",
        "--warmup", "1", "--dtypes", "float32", "--", "-p", "tests.plants.ring_wrong_chunk", "-k", "algorithm",
        nproc=2, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]  # EXIT_WRONG_RESULT
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    ring = [r for r in recs if r["algorithm"] == "ring_p2p"]
    assert len(ring) == 2 and all(r["n_wrong"] > 0 for r in ring)
    assert all(r["n_wrong"] == 0 for r in recs if r["algorithm"] != "ring_p2p")
