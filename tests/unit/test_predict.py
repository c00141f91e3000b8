"""suite.model (make predict): the α–β models against hand-computed values, link calibration and the algorithm
check on synthetic runs, NCCL's algorithm from records and debug lines, the DDP step model, the
validation table, and `make predict` on a stored run (its bad inputs exit 2 with one line); the report's
prediction section is tests/e2e/test_report.py's."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess

import numpy as np
import pytest

from experiments.ddp import model as ddp_model
from suite import metrics
from suite.model import (
    algorithms,
    backend_choice,
    calibrate,
    cli,
    fit,
    links,
    prediction,
    run_model,
    runs,
    validate,
)
from suite.model.links import ClassLink, Topology
from tests.conftest import ROOT
from tests.helpers.make_predict import MAKE, make_predict

S = 1e6  # bytes
INTRA = ClassLink(link_class="intra", alpha_us=1.0, beta_gbps=10.0)  # 1 µs, 10 GB/s: 1e6 B in 100 µs
INTER = ClassLink(link_class="inter", alpha_us=20.0, beta_gbps=1.0)  # 20 µs, 1 GB/s: 1e6 B in 1000 µs
ONE = ClassLink(link_class="intra", alpha_us=10.0, beta_gbps=1.0)  # one class: 10 µs, 1 GB/s
TWO = {"intra": INTRA, "inter": INTER}


def t(op, alg, n, p, links, s=S):
    return prediction.predict(op, alg, Topology(n, p), links, s).time_us


# --- the models, by hand -------------------------------------------------------------------------


def test_ring_on_one_link_is_suite_fit_ring_model_and_its_hand_value():
    # 2(n-1)α + 2(n-1)/n S/β = 14·10 + 1.75·1000 = 1890 µs
    assert t("all_reduce", "ring", 8, 8, {"intra": ONE}) == pytest.approx(1890.0)
    link = fit.Link(alpha_us=10.0, beta_gbps=1.0, source="x")
    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        assert t(op, "ring", 8, 8, {"intra": ONE}) == pytest.approx(float(fit.ring_time_us(op, 8, link, S)))
    # all_gather (n-1)α + (n-1)/n S/β = 70 + 875; chain broadcast (n-1)α + S/β = 70 + 1000
    assert t("all_gather", "ring", 8, 8, {"intra": ONE}) == pytest.approx(945.0)
    assert t("broadcast", "ring", 8, 8, {"intra": ONE}) == pytest.approx(1070.0)


def test_the_models_take_their_op_facts_from_the_one_op_table():
    """The ring's α steps and bytes, pairwise all_to_all's and recursive halving/doubling's bytes (at a power
    of two) on one link are metrics.OP_TABLE's ring latency steps and busbw factor, at every n; a
    prediction's busbw is metrics.busbw_gbps."""
    assert set(algorithms.OPS) <= set(metrics.OP_TABLE)
    for n in range(2, 17):
        topo = Topology(n, n)
        for op in algorithms.OPS[:-1]:
            factor = metrics.busbw_factor(op, n)
            flat = "pairwise" if op == "all_to_all" else "ring"
            ts = algorithms.terms(op, flat, topo, {"intra": ONE}, S)
            assert sum(x.alphas for x in ts) == metrics.ring_latency_steps(op, n), (op, n)
            assert sum(x.bytes for x in ts) == pytest.approx(factor * S), (op, n)
            if op in ("all_reduce", "all_gather", "reduce_scatter") and n & (n - 1) == 0:
                hd = algorithms.terms(op, "halving_doubling", topo, {"intra": ONE}, S)
                assert sum(x.bytes for x in hd) == pytest.approx(factor * S), (op, n)
            pr = prediction.predict(op, flat, topo, {"intra": ONE}, int(S))
            assert pr.busbw_gbps == metrics.busbw_gbps(op, int(S), pr.time_us * 1e-6, n)


def test_ring_over_two_nodes_waits_for_the_inter_node_link():
    # per class 14α + 1.75 S/β: intra 14 + 175 = 189, inter 280 + 1750 = 2030 -> the slower one
    pr = prediction.predict("all_reduce", "ring", Topology(8, 4), TWO, S)
    assert pr.time_us == pytest.approx(2030.0)
    assert pr.bottleneck == "bandwidth-bound, inter-node" and pr.bottleneck_share == pytest.approx(1750 / 2030)
    tiny = prediction.predict("all_reduce", "ring", Topology(8, 4), TWO, 8)
    assert tiny.bottleneck == "latency-bound, inter-node"


def test_binomial_broadcast_rounds_and_node_link_sharing():
    # ceil(log2 n) rounds of α + S/β: n = 8 and n = 5 both 3 rounds
    assert t("broadcast", "tree", 8, 8, {"intra": ONE}) == pytest.approx(3 * 1010.0)
    assert t("broadcast", "tree", 5, 5, {"intra": ONE}) == pytest.approx(3 * 1010.0)
    # 8 ranks, 2 per node: round 1 (0->1) on a node: 1 + 100; round 2 (0->2, 1->3) and round 4
    # (0..3 -> 4..7) put two flows on a node's link: 20 + 2·1000 each
    assert t("broadcast", "tree", 8, 2, TWO) == pytest.approx(101.0 + 2 * 2020.0)


def test_gloos_posted_sends_tree_shares_each_senders_link():
    # one rank per node: the root's two children share its link (2 S/β), then rank 1 forwards to 3:
    # 2 hops, 3 S/β; at 6 ranks the path 0 -> 1 -> 3 carries 3 + 2 children: 5 S/β
    assert t("broadcast", "posted_tree", 4, 1, {"inter": INTER}) == pytest.approx(2 * 20 + 3 * 1000.0)
    assert t("broadcast", "posted_tree", 6, 1, {"inter": INTER}) == pytest.approx(2 * 20 + 5 * 1000.0)
    assert t("broadcast", "posted_tree", 2, 1, {"inter": INTER}) == t("broadcast", "tree", 2, 1, {"inter": INTER})
    # 2 nodes x 2 ranks (fluid simulation): 0 -> 1 on the node (1 + 100 µs); 0 -> 2 starts at 20 µs alone,
    # shares node 0's link with 1 -> 3 from 121 µs, ends at 1919; 1 -> 3 then alone, ends at 2020
    assert t("broadcast", "posted_tree", 4, 2, TWO) == pytest.approx(2020.0)


def test_recursive_halving_doubling_power_of_two_and_folded():
    # 2 log2 n α + 2(n-1)/n S/β = 60 + 1750
    assert t("all_reduce", "halving_doubling", 8, 8, {"intra": ONE}) == pytest.approx(1810.0)
    # n = 6 folds into 4: 2·2·10 + 1.5·1000 = 1540, plus one whole-buffer step each way 2·1010
    assert t("all_reduce", "halving_doubling", 6, 6, {"intra": ONE}) == pytest.approx(3560.0)
    # all_gather by recursive doubling: log2 n α + (n-1)/n S/β
    assert t("all_gather", "halving_doubling", 8, 8, {"intra": ONE}) == pytest.approx(30 + 875.0)
    # with 2 ranks per node the distance-2 and -4 steps put both ranks of a node on its link
    # reduce-scatter halving: d=4 (S/2, 2 flows) 20 + 1000, d=2 (S/4, 2 flows) 20 + 500, d=1 (S/8, intra) 1 + 12.5
    assert t("reduce_scatter", "halving_doubling", 8, 2, TWO) == pytest.approx(1020 + 520 + 13.5)


def test_folded_halving_doubling_moves_the_whole_buffer_only_where_the_op_does():
    # n = 6 folds 2 extra ranks into 4 (Thakur et al. 2005 §4). reduce_scatter: each extra sends its whole
    # buffer in (10 + 1000) and receives only its own chunk S/6 after (10 + 166.7), around the halving of 4
    # (S/2 and S/4: 20 + 750); all_gather is its mirror: the chunk in, the whole buffer out
    assert t("reduce_scatter", "halving_doubling", 6, 6, {"intra": ONE}) == pytest.approx(770 + 1010 + 10 + S / 6e3)
    assert t("all_gather", "halving_doubling", 6, 6, {"intra": ONE}) == pytest.approx(770 + 10 + S / 6e3 + 1010)
    # broadcast: the extras are only answered (one whole-buffer step after scatter + all-gather: 2·20 + 1500)
    assert t("broadcast", "halving_doubling", 6, 6, {"intra": ONE}) == pytest.approx(40 + 1500 + 1010)


def test_nccl_tree_and_hierarchical_all_reduce():
    # NCCL tree: 2((P-1)α_intra + log2(m) α_inter) + 2 S/β of the slower class = 2(7 + 20) + 2000
    assert t("all_reduce", "tree", 16, 8, TWO) == pytest.approx(2054.0)
    # hierarchical: intra RS 7 + 87.5, inter ring all_reduce over 2 nodes 40 + 1000, intra AG 94.5
    assert t("all_reduce", "hierarchical", 16, 8, TWO) == pytest.approx(94.5 + 1040 + 94.5)
    # the flat ring over the same 16 ranks: 30·20 + 1.875·1000
    assert t("all_reduce", "ring", 16, 8, TWO) == pytest.approx(2475.0)
    # one level only (one rank per node): hierarchical is the ring
    assert t("all_reduce", "hierarchical", 4, 1, {"inter": INTER}) == t("all_reduce", "ring", 4, 1, {"inter": INTER})


def test_pairwise_all_to_all_and_the_node_link():
    link = fit.Link(alpha_us=10.0, beta_gbps=1.0, source="x")
    assert t("all_to_all", "pairwise", 4, 4, {"intra": ONE}) == pytest.approx(
        float(fit.ring_time_us("all_to_all", 4, link, S))
    )
    # 4 ranks, 2 per node: a node's link carries P(n-P)/n S = 1e6 B over the 3 steps (+ 3 α)
    assert t("all_to_all", "pairwise", 4, 2, TWO) == pytest.approx(1060.0)


def test_gloo_reduce_scatter_costs_an_all_reduce_and_barriers_count_rounds():
    assert t("reduce_scatter", "allreduce_slice", 6, 1, {"inter": INTER}) == t(
        "all_reduce", "ring", 6, 1, {"inter": INTER}
    )
    assert t("barrier", "dissemination", 8, 8, {"intra": ONE}, 0) == pytest.approx(30.0)
    assert t("barrier", "dissemination", 5, 5, {"intra": ONE}, 0) == pytest.approx(30.0)
    assert t("barrier", "tree", 8, 8, {"intra": ONE}, 0) == pytest.approx(60.0)
    assert prediction.predict("all_gather", "tree", Topology(4, 4), {"intra": ONE}, S) is None  # no such model


def test_an_unmeasured_class_is_taken_equal_and_says_so():
    full = links.complete_links({"intra": ONE}, Topology(8, 4))
    assert full["inter"].alpha_us == ONE.alpha_us and "not measured" in full["inter"].source


def test_interval_is_the_model_at_the_ends_of_the_link_intervals():
    lk = ClassLink(link_class="intra", alpha_us=10.0, beta_gbps=1.0, alpha_ci_us=(5.0, 20.0), beta_ci_gbps=(0.5, 2.0))
    pr = prediction.predict("all_reduce", "ring", Topology(8, 8), {"intra": lk}, S)
    assert pr.time_us == pytest.approx(1890.0)
    assert pr.time_ci_us == pytest.approx((14 * 5 + 1750 / 2, 14 * 20 + 1750 * 2))
    assert pr.busbw_gbps == pytest.approx(S / (1890e-6) / 1e9 * 1.75)


def test_topology_rejects_partial_nodes():
    with pytest.raises(ValueError):
        Topology(10, 4)


# --- calibration and the algorithm check on synthetic runs --------------------------------------------

SIZES = [4096 * 4**i for i in range(6)]


def _points(op, alg, worlds, link, noise=0.0, seed=0, per_node=1):
    rng = np.random.default_rng(seed)
    out = []
    for n in worlds:
        topo = Topology(n, per_node)
        for s in SIZES:
            tt = prediction.predict(op, alg, topo, {link.link_class: link}, s).time_us * math.exp(rng.normal(0, noise))
            out.append(runs.Point(op=op, topo=topo, size_bytes=s, time_us=tt, backend="gloo"))
    return out


def test_calibrate_recovers_the_link_from_two_world_sizes():
    true = ClassLink(link_class="inter", alpha_us=300.0, beta_gbps=0.0125)
    got = calibrate.calibrate(_points("broadcast", "tree", (2, 3), true, noise=0.03), "tree", {})
    assert got.link_class == "inter"
    assert got.beta_gbps == pytest.approx(0.0125, rel=0.05) and got.beta_ci_gbps[0] <= 0.0125 <= got.beta_ci_gbps[1]
    assert got.alpha_us == pytest.approx(300.0, rel=0.3)


def test_calibrate_with_two_ranks_per_node_and_no_intra_evidence_finds_the_inter_link():
    """Two ranks per node, no point-to-point records: the op's time is put on the inter-node link (the
    unmeasured intra-node one taken as free while calibrating). It returned None here once (both classes
    started at one unit link, the tie went to intra, and no inter-node term was left to fit), so every
    2-ranks-per-node all_reduce was predicted over other ops' links."""
    inter = ClassLink(link_class="inter", alpha_us=300.0, beta_gbps=0.0125)
    intra = ClassLink(link_class="intra", alpha_us=20.0, beta_gbps=1.0)
    pts = []
    for n in (4, 6):
        topo = Topology(n, 2)
        for s in SIZES:
            pts.append(
                runs.Point(
                    op="all_reduce",
                    topo=topo,
                    size_bytes=s,
                    time_us=prediction.predict("all_reduce", "ring", topo, {"inter": inter, "intra": intra}, s).time_us,
                    backend="gloo",
                )
            )
    got = calibrate.calibrate(pts, "ring", {})
    assert got is not None and got.link_class == "inter"
    assert got.beta_gbps == pytest.approx(0.0125, rel=0.05) and got.alpha_us == pytest.approx(300.0, rel=0.2)


def test_calibrate_through_the_ring_is_suite_fit_implied_link():
    true = ClassLink(link_class="intra", alpha_us=50.0, beta_gbps=2.0)
    pts = _points("all_reduce", "ring", (4,), true, noise=0.05, seed=3, per_node=4)
    got = calibrate.calibrate(pts, "ring", {})
    series = fit.fit_alpha_beta([p.size_bytes for p in pts], [p.time_us for p in pts])
    implied = fit.implied_link("all_reduce", 4, series)
    assert got.alpha_us == pytest.approx(implied.alpha_us, rel=1e-6)
    assert got.beta_gbps == pytest.approx(implied.beta_gbps, rel=1e-6)


def test_the_check_confirms_the_documented_algorithm_and_catches_another():
    true = ClassLink(link_class="inter", alpha_us=200.0, beta_gbps=0.0125)
    as_gloo = run_model.check_algorithms(_points("broadcast", "posted_tree", (2, 3, 4), true, noise=0.02), {})
    assert as_gloo["broadcast"].startswith("posted_tree consistent")
    rounds = run_model.check_algorithms(_points("broadcast", "tree", (2, 3, 4), true, noise=0.02), {})
    assert rounds["broadcast"].startswith("measurements favour tree over the documented posted_tree")
    one_world = run_model.check_algorithms(_points("broadcast", "posted_tree", (2,), true), {})
    assert one_world["broadcast"].startswith("not testable here")


# --- NCCL: which algorithm, from records and debug output --------------------------------------------

DEBUG = """node0:1:1 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo Tree proto LL channel{Lo..Hi}={0..1}
node0:1:1 [0] NCCL INFO AllReduce: 8388608 Bytes -> Algo RING proto Simple channel{Lo..Hi}={0..15}
node0:1:1 [0] NCCL INFO AllGather: 37756928 Bytes -> Algo 1 proto 2 time 2860.208008
"""


def test_nccl_algorithm_from_debug_lines_in_both_formats():
    got = backend_choice.nccl_debug_choices(DEBUG)
    assert got == {("all_reduce", 4096): "tree", ("all_reduce", 8388608): "ring", ("all_gather", 37756928): "1"}
    recs = [{"backend": "nccl", "op": "all_reduce", "nccl_algo": "default", "nccl_debug": DEBUG}]
    assert backend_choice.backend_algorithm("nccl", "all_reduce", 2048, recs).algorithm == "tree"
    c = backend_choice.backend_algorithm("nccl", "all_reduce", 16 << 20, recs)
    assert c.algorithm == "ring" and "8388608 B -> Algo ring" in c.how
    assert backend_choice.backend_algorithm("nccl", "all_gather", 1 << 25, recs).algorithm == "ring"  # Algo 1 = ring


def test_nccl_algorithm_from_nccl_algo_records_or_unknown():
    forced = [{"backend": "nccl", "op": "all_reduce", "nccl_algo": "Tree"}]
    assert backend_choice.backend_algorithm("nccl", "all_reduce", 1 << 20, forced).algorithm == "tree"
    assert backend_choice.backend_algorithm("nccl", "all_gather", 1 << 20, forced).algorithm == "ring"
    unknown = backend_choice.backend_algorithm("nccl", "all_reduce", 1 << 20, [{"nccl_algo": "default"}])
    assert unknown.algorithm is None and "NCCL_DEBUG_SUBSYS=TUNING" in unknown.how
    nvls = backend_choice.backend_algorithm("nccl", "all_reduce", 1 << 20, [{"nccl_algo": "NVLS"}])
    assert nvls.algorithm is None and "not modelled" in nvls.how


# --- DDP --------------------------------------------------------------------------------------------


def test_ddp_step_model_by_hand():
    rec = {
        "model": "mlp",
        "world_size": 2,
        "hosts": 2,
        "time_us": 9000.0,
        "noop_step_ms": 5.0,
        "solo_step_ms": 4.0,
        "allreduce_ms": 3.0,
        "overlap_saved_ms": 1.5,
        "ddp_logger_backward_compute_ms": 10.0,
        "bucket_sizes": [1_000_000, 1_000_000],
    }
    links = {"inter": ClassLink(link_class="inter", alpha_us=0.0, beta_gbps=1.0)}
    d = ddp_model.predict_ddp(rec, Topology(4, 1), links, "ring")
    # per bucket at 4 ranks: 2·3/4 · 1e6 B / 1 GB/s = 1500 µs; two buckets 3000; hidden half of it
    assert d["comm_us"] == pytest.approx(3000.0) and d["hidden_fraction"] == 0.5
    assert d["step_us"] == pytest.approx(5000 + 3000 - 1500)
    assert d["scaling_efficiency"] == pytest.approx(4000 / 6500)
    # at the measured 2 ranks: 1000 µs per bucket
    assert d["model_step_at_measured_us"] == pytest.approx(5000 + 2000 - 1000)


# --- the validation table -----------------------------------------------------------------------------


def _run(worlds_per_node, op_algs, link, noise=0.0, seed=0):
    """A stored run's JSON with collectives records generated by the given models."""
    n, p = worlds_per_node
    rng = np.random.default_rng(seed)
    benches = []
    for op, alg in op_algs:
        for s in [0] if op == "barrier" else SIZES:
            tt = prediction.predict(op, alg, Topology(n, p), {link.link_class: link}, s).time_us * math.exp(
                rng.normal(0, noise)
            )
            benches.append(
                {
                    "extra_info": {
                        "experiment": "collectives",
                        "op": op,
                        "variant": runs.FIT_VARIANTS[op],
                        "redop": "sum" if op in ("all_reduce", "reduce_scatter") else None,
                        "backend": "gloo",
                        "device": "cpu",
                        "world_size": n,
                        "size_bytes": s,
                        "time_us": tt,
                        "n_wrong": 0,
                    }
                }
            )
    hosts = [f"node{r // p}" for r in range(n)]
    return {
        "benchmarks": benches,
        "machine_info": {"suite": {"hostnames": hosts, "world_size": n}},
        "suite": {"run_id": f"synthetic-{n}"},
    }


GLOO_MODELS = [(op, backend_choice.GLOO[op][0]) for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast")]


def test_validation_of_runs_made_by_the_model_has_no_error_and_the_table_says_met():
    link = ClassLink(link_class="inter", alpha_us=300.0, beta_gbps=0.0125)
    v = validate.validate(
        [_run((2, 1), GLOO_MODELS, link, 0.01, 1), _run((3, 1), GLOO_MODELS, link, 0.01, 2)],
        [_run((5, 1), GLOO_MODELS, link)],
    )
    assert v["fit_ranks"] == [2, 3] and {r["ranks"] for r in v["rows"]} == {5}
    for op, _ in GLOO_MODELS:
        assert v["summary"][op]["geomean_abs_error_bandwidth_bound"] < 0.05
    text = validate.format_validation(v)
    assert "met" in text and "MISSED" not in text and "all_reduce" in text


def test_validation_says_missed_when_the_backend_runs_something_else():
    link = ClassLink(link_class="inter", alpha_us=300.0, beta_gbps=0.0125)
    chain = [("broadcast", "ring")]  # the data is a chain broadcast; Gloo's table says binomial tree
    v = validate.validate([_run((2, 1), chain, link), _run((3, 1), chain, link)], [_run((6, 1), chain, link)])
    assert v["summary"]["broadcast"]["geomean_abs_error_bandwidth_bound"] > 0.3
    assert "MISSED" in validate.format_validation(v)
    assert v["algorithms"]["broadcast"]["check"].startswith("measurements favour ring")


def _ddp_rec(n, noop_ms, time_us):
    return {
        "experiment": "ddp",
        "op": "ddp_step",
        "label": "ddp",
        "model": "mlp",
        "backend": "gloo",
        "world_size": n,
        "hosts": n,
        "time_us": time_us,
        "n_wrong": 0,
        "noop_step_ms": noop_ms,
        "solo_step_ms": 4.0,
        "allreduce_ms": 3.0,
        "overlap_saved_ms": 0.0,
        "bucket_sizes": [1_000_000],
    }


def test_validation_checks_the_ddp_step_from_the_nearest_fit_run():
    """The DDP step at the check scale is predicted from the fit run nearest to it (its compute, buckets and
    overlap), and the table gives its error and their geomean."""
    link = ClassLink(link_class="inter", alpha_us=300.0, beta_gbps=0.0125)
    fit2, fit3, chk = _run((2, 1), GLOO_MODELS, link), _run((3, 1), GLOO_MODELS, link), _run((5, 1), GLOO_MODELS, link)
    ring5 = prediction.predict("all_reduce", "ring", Topology(5, 1), {"inter": link}, 1_000_000).time_us
    fit2["benchmarks"].append({"extra_info": _ddp_rec(2, 50.0, 1e5)})  # a different compute: not the base
    fit3["benchmarks"].append({"extra_info": _ddp_rec(3, 5.0, 1e5)})
    chk["benchmarks"].append({"extra_info": _ddp_rec(5, 5.0, 5000.0 + ring5)})
    v = validate.validate([fit2, fit3], [chk])
    (row,) = v["ddp"]
    assert row["ranks"] == 5 and row["fit_ranks"] == 3
    assert row["predicted_us"] == pytest.approx(5000.0 + ring5, rel=0.02)
    assert v["ddp_summary"]["geomean_abs_error"] < 0.02
    assert "ddp step (mlp) at 5 ranks" in validate.format_validation(v)
    # a check scale between the fits takes the nearer one (2 for 3 ranks, not the larger 5)
    fit5 = _run((5, 1), GLOO_MODELS, link)
    fit5["benchmarks"].append({"extra_info": _ddp_rec(5, 50.0, 1e5)})
    chk3 = _run((3, 1), GLOO_MODELS, link)
    chk3["benchmarks"].append({"extra_info": _ddp_rec(3, 50.0, 1e5)})
    fit2 = _run((2, 1), GLOO_MODELS, link)
    fit2["benchmarks"].append({"extra_info": _ddp_rec(2, 5.0, 1e5)})
    (row,) = validate.validate([fit2, fit5], [chk3])["ddp"]
    assert row["fit_ranks"] == 2 and row["compute_us"] == 5000.0


def _sharded_step(n: int, time_us: float, compute_s: float) -> dict:
    """A sharded ddp train_step record (width and batch 12: 2, 3 and 4 ranks split them)."""
    shape = {"strategy": "ddp", "label": "ddp", "width": 12, "depth": 2, "seq": 4, "batch": 12}
    common = {"experiment": "sharded", "backend": "gloo", "device": "cpu", "world_size": n, "hosts": n, "n_wrong": 0}
    return {"extra_info": common | shape | {"op": "train_step", "time_us": time_us, "compute_s": compute_s}}


def _containers_on_two_cores(run: dict) -> dict:
    """The run as the compose simulation stores it: a rank per container, each seeing the machine's 2 cores."""
    su = run["machine_info"]["suite"]
    su["hosts"] = {h: {"cpu_share": {"ranks": 1, "usable_cpus": 2}} for h in set(su["hostnames"])}
    return run


def test_validate_prices_the_compute_of_ranks_that_outnumber_their_cores_from_the_probe(tmp_path, capsys):
    """`python -m suite.model validate --one-machine` (what make validate-predict runs on the compose
    simulation): at 4 ranks on 2 cores a sharded step's compute is the 4-rank run's compute alone (measured on
    all 4 at once), not a + b/N from the 2- and 3-rank runs; without it, a + b/N as before."""
    link = ClassLink(link_class="inter", alpha_us=300.0, beta_gbps=0.0125)
    runs = {n: _containers_on_two_cores(_run((n, 1), GLOO_MODELS, link)) for n in (2, 3, 4)}
    runs[2]["benchmarks"].append(_sharded_step(2, 1e5, 0.010))  # a + b/N: b = 18 ms, a = 1 ms: 5.5 ms at 4
    runs[3]["benchmarks"].append(_sharded_step(3, 1e5, 0.007))
    runs[4]["benchmarks"].append(_sharded_step(4, 50_000.0, 0.030))  # 4 containers on 2 cores: 30 ms
    for n, run in runs.items():
        (tmp_path / f"r{n}.json").write_text(json.dumps(run))
    args = ["validate", "--fit", f"{tmp_path}/r2.json,{tmp_path}/r3.json", "--check", f"{tmp_path}/r4.json"]
    rows = {}
    for flag in ("--one-machine", None):
        out = tmp_path / f"v{flag}.json"
        assert cli.main([*args, "--out", str(out), *([flag] if flag else [])]) == 0
        v = json.loads(out.read_text())
        (rows[flag],) = v["sharded"]
        assert v["one_machine"] == bool(flag)
    probe, before = rows["--one-machine"], rows[None]
    assert probe["compute_us"] == pytest.approx(30_000.0) and probe["compute_probe_us"] == pytest.approx(30_000.0)
    assert probe["compute_model"].startswith("the probe at 4 ranks")
    assert "4 ranks share 2 cores" in probe["compute_model"]
    assert probe["predicted_us"] == pytest.approx(30_000.0 + probe["predicted_comm_us"])
    assert before["compute_us"] == pytest.approx(5500.0) and before["compute_probe_us"] is None
    assert before["compute_model"] == "a + b/N on 2/3 ranks"
    assert "(compute: the probe, 30 ms on all 4 ranks at once)" in capsys.readouterr().out
    # make validate-predict says its compose nodes share one machine
    r = subprocess.run(
        [*MAKE, "-n", "validate-predict", "RESULTS=/nonexistent"], cwd=ROOT, capture_output=True, text=True
    )
    assert "-m suite.model validate" in r.stdout and "--one-machine" in r.stdout, r.stdout + r.stderr


def test_validate_prices_a_cpu_steps_compute_from_the_step_less_its_replay_not_a_compute_alone_over_the_step(
    tmp_path,
):
    """A sharded step on shared cores whose compute alone (the step on fake groups, measured apart) took longer
    than the whole step (95 ms against 71 ms, as tp's did on the compose simulation): `validate --one-machine`
    prices the compute the step did, its 71 ms less its collectives replayed alone (40 ms), and keeps the compute
    alone in the row as measured."""
    link = ClassLink(link_class="inter", alpha_us=300.0, beta_gbps=0.0125)
    runs = {n: _containers_on_two_cores(_run((n, 1), GLOO_MODELS, link)) for n in (2, 3, 4)}
    runs[2]["benchmarks"].append(_sharded_step(2, 1e5, 0.010))
    runs[3]["benchmarks"].append(_sharded_step(3, 1e5, 0.007))
    step4 = _sharded_step(4, 71_000.0, 0.095)
    replay = step4["extra_info"] | {"op": "comm_replay", "label": "replay-ddp", "time_us": 4e4, "comm_replay_s": 0.040}
    runs[4]["benchmarks"] += [step4, {"extra_info": replay}]
    for n, run in runs.items():
        (tmp_path / f"r{n}.json").write_text(json.dumps(run))
    out = tmp_path / "v.json"
    args = ["validate", "--fit", f"{tmp_path}/r2.json,{tmp_path}/r3.json", "--check", f"{tmp_path}/r4.json"]
    assert cli.main([*args, "--one-machine", "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["sharded"]
    assert row["compute_us"] == pytest.approx(31_000.0) and row["compute_probe_us"] == pytest.approx(31_000.0)
    assert "the step minus its collectives replayed alone" in row["compute_model"]
    assert row["measured_compute_us"] == pytest.approx(95_000.0)  # the compute alone, as measured
    assert row["predicted_us"] == pytest.approx(31_000.0 + row["predicted_comm_us"])


def test_geomean_abs_error_by_hand():
    assert validate.geomean_abs([0.1, -0.4]) == pytest.approx(0.2)
    assert validate.geomean_abs([]) is None


# --- make predict --------------------------------------------------------------------------------------

FIXTURE = ROOT / "tests" / "fixtures" / "collectives-gloo-2"


def test_make_predict_prints_the_table_and_writes_predict_json(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    r = make_predict(f"RUN={run}", "RANKS=1024", "RANKS_PER_NODE=8", "SIZES=1M,64M")
    assert r.returncode == 0, r.stderr
    assert "prediction at 1024 ranks (8 per node, 128 nodes)" in r.stdout
    assert "ring *" in r.stdout and "posted_tree *" in r.stdout and "allreduce_slice *" in r.stdout
    assert "not measured: taken equal to the intra link" in r.stdout  # a one-host run has no inter-node link
    doc = json.loads((run / "predict.json").read_text())
    assert doc["ranks"] == 1024 and doc["nodes"] == 128 and doc["measured_ranks"] == 2
    marked = [p for p in doc["predictions"] if p["backend_choice"]]
    assert {p["op"] for p in marked} == set(algorithms.OPS)
    assert {p["size_bytes"] for p in doc["predictions"] if p["op"] == "all_reduce"} == {1 << 20, 64 << 20}
    big = next(p for p in marked if p["op"] == "all_reduce" and p["size_bytes"] == 64 << 20)
    assert re.fullmatch(r"(latency|bandwidth)-bound, (intra|inter)-node", big["bottleneck"])
    assert big["time_ci_us"][0] <= big["time_us"] <= big["time_ci_us"][1]
    # the fixture's all_reduce is latency-bound at every size it measured: β comes from the other ops, said so
    assert "no bandwidth term at the sizes measured" in doc["links"]["per_op"]["all_reduce"]["intra"]["source"]
    assert doc["measured_scale"] and all(row["measured_us"] > 0 for row in doc["measured_scale"])
    assert not list(run.glob(".predict.json.*"))  # written through a temp file and renamed


@pytest.mark.parametrize(
    "args, says",
    [
        (["/nonexistent/run", "--ranks", "8", "--ranks-per-node", "2"], "no stored run at /nonexistent/run"),
        (["--ranks", "0", "--ranks-per-node", "1"], "RANKS must be a positive integer"),
        (["--ranks", "abc", "--ranks-per-node", "1"], "RANKS must be a positive integer"),
        (["--ranks", "1024", "--ranks-per-node", ""], "RANKS_PER_NODE must be a positive integer"),
        (["--ranks", "1024", "--ranks-per-node", "3"], "RANKS_PER_NODE=3 must divide RANKS=1024"),
        (["--ranks", "16", "--ranks-per-node", "4", "--sizes", "1Q"], "SIZES: not a byte size"),
    ],
)
def test_predict_bad_input_is_one_line_and_exit_2(args, says, capsys):
    if not args[0].startswith("/"):
        args = [str(FIXTURE), *args]
    assert cli.main(["predict", *args]) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], err


def test_make_predict_passes_its_variables_and_a_bad_one_exits_2_with_one_line():
    # what each make variable becomes on the command line (the in-process test above checks the messages)
    r = make_predict("-n", "RUN=R", "RANKS=64", "RANKS_PER_NODE=8", "SIZES=1M,64M")  # -n: the command, not run
    assert (
        r.returncode == 0
        and '-m suite.model predict "R" --ranks "64" --ranks-per-node "8" --sizes "1M,64M"' in r.stdout
    )
    r = make_predict(f"RUN={FIXTURE}", "RANKS=1024")  # RANKS_PER_NODE unset: an empty string
    assert r.returncode == 2, (r.stdout, r.stderr)
    err = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("make")]
    assert len(err) == 1 and "RANKS_PER_NODE must be a positive integer" in err[0], r.stderr


@pytest.mark.parametrize(
    "knobs",
    [[], ["VALIDATE_OPS="], ["VALIDATE_DDP="], ["VALIDATE_OPS=all_reduce", "VALIDATE_DDP="], ["VALIDATE_SHARDED="]],
)
def test_validate_predict_selects_cases_with_a_valid_k_expression(knobs, tmp_path):
    """The -k expression the validation's compose runs get parses (an empty VALIDATE_OPS once made it
    "(test_collective and ())", which pytest rejects only after every container has started)."""
    from _pytest.mark.expression import Expression

    # make -n prints the recipe, K expression included, and runs it all the same (it calls $(MAKE)): with no node
    # counts it starts no compose run, not even a sub-make's dry run (each a python start)
    no_runs = ["VALIDATE_FIT=", "VALIDATE_CHECK="]
    r = subprocess.run(
        [*MAKE, "-n", "validate-predict", f"RESULTS={tmp_path}", *no_runs, *knobs],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    ks = re.findall(r' K="([^"]*)"', r.stdout)
    assert ks, r.stdout + r.stderr
    for k in ks:
        Expression.compile(k)  # raises ParseError on a bad expression
        assert "test_collective" in k and ("test_ddp" in k) == ("VALIDATE_DDP=" not in knobs)
        assert ("test_sharded" in k) == ("VALIDATE_SHARDED=" not in knobs)
    sharded = "VALIDATE_SHARDED=" not in knobs
    assert (
        "EXPERIMENTS=collectives,ddp,sharded" in r.stdout or "EXPERIMENTS=collectives,sharded" in r.stdout
    ) == sharded
    # every sharded strategy it runs can run at every node count (2..6): the width and batch split
    from experiments.sharded import shapes

    knob = dict(re.findall(r"SHARDED_(STRATEGIES|WIDTH|BATCH|SEQ)=(\S+)", r.stdout))
    for n in range(2, 7):
        for st in knob["STRATEGIES"].split(","):
            assert shapes.cannot_run(st, n, int(knob["WIDTH"]), int(knob["SEQ"]), int(knob["BATCH"])) is None


def test_validate_predict_makes_the_results_directory_first(tmp_path):
    """On a fresh clone there is no results/ yet: each compose run's log goes there, so the directory is made
    before the first run (the compose runs stubbed out with MAKE=true: the validation then finds no stored run,
    and says so, where the old recipe failed at the first log with "compose run ... failed")."""
    results = tmp_path / "fresh" / "results"
    r = subprocess.run(
        [*MAKE, "-s", "validate-predict", f"RESULTS={results}", "MAKE=true", "VALIDATE_FIT=2", "VALIDATE_CHECK=4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "compose run" not in r.stderr and (results / "validate-predict-2n1p.log").is_file(), r.stderr
    assert r.returncode != 0 and f"no stored run at {results}/validate-predict-2n1p" in r.stderr, r.stderr


def test_make_predict_reads_a_slow_links_latency_in_a_unit_a_person_reads():
    """A link whose α is 1.5 ms prints "α 1.5 ms [1.2 ms, 1.8 ms]", not "1.5e+03 µs [1.2e+03, 1.8e+03]"."""
    from suite.model.document import format_links
    from suite.model.links import ClassLink

    slow = ClassLink(
        link_class="inter",
        alpha_us=1500.0,
        beta_gbps=0.1,
        alpha_ci_us=(1200.0, 1800.0),
        knee_bytes=4096,
        small=(2500.0, 0.05),
    )
    (line,) = format_links({"inter": slow}, "all_reduce link")
    assert "α 1.5 ms [1.2 ms, 1.8 ms]" in line and "α 2.5 ms, β 0.05 GB/s" in line and "e+0" not in line, line
