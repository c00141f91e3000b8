"""Pure logic of the placement experiment and its tables (no process group)."""

import os

import pytest
import torch

from experiments.placement import cases as placement

from experiments.placement import contiguity, gpu, gpu_cases, pinning
from experiments.placement import workload as placement_workload
from suite.ops import algorithms
from suite.case import CaseFailed
from suite.common.config import ConfigError, build_config
from suite.common.knobs import settings_from_env
from suite.harness.dist import DistContext
from experiments.placement import table as tables
from suite.system import affinity, topology


def test_node_layout_from_hostnames_and_fake_blocks():
    assert algorithms.node_layout(["b", "a", "b", "a"]) == (0, 1, 0, 1)
    assert algorithms.node_layout(["h"] * 4, 2) == (0, 0, 1, 1)
    assert algorithms.node_layout(["h"] * 3, 2) == (0, 0, 1)
    assert algorithms.ranks_by_node((0, 1, 0, 1)) == ((0, 2), (1, 3))
    with pytest.raises(ValueError, match="1..4"):
        algorithms.node_layout(["h"] * 4, 5)


def test_fake_nodes_env_is_validated():
    def fake(env):
        return build_config(**settings_from_env(env)).placement.fake_nodes

    assert fake({}) == 0 and fake({"SUITE_FAKE_NODES": "2"}) == 2
    with pytest.raises(ConfigError, match="SUITE_FAKE_NODES='two' is not a count"):
        fake({"SUITE_FAKE_NODES": "two"})
    with pytest.raises(ConfigError, match="SUITE_FAKE_NODES must be >= 0"):
        fake({"SUITE_FAKE_NODES": "-1"})


def test_pairs_and_groups_on_one_and_two_nodes():
    pairs, groups = placement_workload.plan_pairs_and_groups((0, 0, 0, 0))
    assert pairs == {"intra": (0, 1), "inter": None}
    assert groups == {"intra": (0, 1, 2, 3), "inter": None}
    pairs, groups = placement_workload.plan_pairs_and_groups((0, 0, 1, 1))
    assert pairs == {"intra": (0, 1), "inter": (0, 2)}
    assert groups == {"intra": (0, 1), "inter": (0, 2)}  # equal sizes
    pairs, groups = placement_workload.plan_pairs_and_groups((0, 1, 2))
    assert pairs["intra"] is None and groups == {"intra": None, "inter": None}


@pytest.mark.parametrize("count,shape", [(65536, (256, 256)), (32, (4, 8)), (7, (1, 7)), (12, (2, 6))])
def test_matrix_shape(count, shape):
    rows, cols = contiguity.matrix_shape(count)
    assert (rows, cols) == shape and rows * cols == count


def test_parse_cpulist():
    assert topology.parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert topology.parse_cpulist("") == []
    assert tables._cpulist([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"


def test_gpu_cases_skip_reason_without_cuda():
    ctx = DistContext(
        rank=0,
        world_size=1,
        local_rank=0,
        local_world_size=1,
        backend="gloo",
        device=torch.device("cpu"),
        group=None,
        timeout_s=10,
        hostnames=["h"],
    )
    reason = gpu.gpu_skip_reason(ctx)
    if torch.cuda.is_available():
        assert "DEVICE=cpu" in reason
    else:
        assert reason.startswith("GPU placement case: no CUDA")


def test_pin_and_restore_every_thread():
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity on this platform")
    before = os.sched_getaffinity(0)
    threads = torch.get_num_threads()
    saved = affinity.pin_process(min(before))
    try:
        assert os.sched_getaffinity(0) == {min(before)}
    finally:
        affinity.restore(saved)
    assert os.sched_getaffinity(0) == before and torch.get_num_threads() == threads


class _OneRank:
    """Just enough of a DistContext for the pinning helper (agree_all over one rank)."""

    local_rank, local_world_size = 0, 1

    @staticmethod
    def agree_all(ok: bool) -> bool:
        return ok


def test_affinity_case_pins_when_built_and_restores_in_its_check():
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity on this platform")
    before, threads = os.sched_getaffinity(0), torch.get_num_threads()
    pin = pinning.Pinning("pinned")
    fields = pin.apply(_OneRank)
    fields_again = pin.apply(_OneRank)  # a second buffer set of the same case: still the first saved state
    try:
        assert os.sched_getaffinity(0) == {min(before)}
        assert fields == fields_again and fields["pinned_core"] == min(before) and fields["torch_threads"] == threads
    finally:
        pin.restore(_OneRank)
    assert os.sched_getaffinity(0) == before and torch.get_num_threads() == threads
    pin.restore(_OneRank)  # the next buffer set's check: nothing left to restore, still verified
    # a case that leaves the process changed fails (on every rank alike)
    pin = pinning.Pinning("unpinned")
    pin.apply(_OneRank)
    os.sched_setaffinity(0, {min(before)})  # something the case's restore does not undo
    try:
        with pytest.raises(CaseFailed, match="not restored"):
            pin.restore(_OneRank)
    finally:
        os.sched_setaffinity(0, before)


def test_affinity_has_no_torch_threads_axis():
    """torch.set_num_threads sizes ATen's pool, not Gloo's workers: the affinity cases do not vary it
    (nor touch it), they vary the pinning only."""
    cases = placement.affinity_cases(build_config(max_bytes="64K"), 4)
    assert [c.identity["pinning"] for c in cases] == ["unpinned", "pinned"]
    assert not any("threads" in k for c in cases for k in c.identity)
    threads = torch.get_num_threads()
    pin = pinning.Pinning("unpinned")
    pin.apply(_OneRank)
    try:
        assert torch.get_num_threads() == threads
    finally:
        pin.restore(_OneRank)


def test_declared_cases_keep_the_test_ids():
    cfg = build_config(max_bytes="64K")
    ids = {
        name: [c.label for c in provider(cfg, 4)]
        for name, provider in [
            ("topology", placement.topology_cases),
            ("pair", placement.pair_cases),
            ("group", placement.group_cases),
            ("hier", placement.hierarchical_cases),
            ("affinity", placement.affinity_cases),
            ("contig", placement.contiguity_cases),
            ("gpu", gpu_cases.gpu_placement_cases),
            ("staging", gpu_cases.gpu_staging_cases),
            ("copy", gpu_cases.copy_bandwidth_cases),
        ]
    }
    assert ids["topology"] == ["topology"]
    assert ids["pair"] == ids["group"] == [f"{k}-{s}B" for k in ("intra", "inter") for s in (4096, 16384, 65536)]
    assert ids["hier"][:2] == ["flat-float32-4096B", "hierarchical-float32-4096B"] and len(ids["hier"]) == 6
    assert ids["affinity"] == ["unpinned", "pinned"]
    # the copy round trip of each size first (the transposed cases take its time as their copy time)
    assert ids["contig"][:4] == [
        "copy-transposed-4096B",
        "copy-transposed-16384B",
        "copy-transposed-65536B",
        "all_reduce-contiguous-4096B",
    ]
    assert len(ids["contig"]) == 3 + 12
    assert len(ids["gpu"]) == 4 * 3 and len(ids["staging"]) == 4 * 3 and len(ids["copy"]) == 5 * 4
    assert ids["staging"][:2] == ["pinned-blocking-4096B", "pinned-non_blocking-4096B"]
    assert ids["copy"][0] == "h2d-pinned-1024B" and ids["copy"][-1] == "d2d-device-65536B"
    # the timed op of topology is a barrier: nothing to check, and the case says so
    topo = placement.topology_cases(cfg, 4)[0]
    assert topo.unchecked and topo.timing.max_iters == 5 and topo.timing.warmup == 1
    # patterns that complete inside one call are timed blocking
    assert {c.timing.mode for c in placement.hierarchical_cases(cfg, 4)} == {"blocking"}
    assert {c.timing.mode for c in placement.contiguity_cases(cfg, 4) if c.op == "send_recv"} == {"blocking"}


def test_pivot_ratio_and_copy_table():
    def rec(col, t, **kw):
        return {
            "op": "all_reduce",
            "size_bytes": 4096,
            "dtype": "float32",
            "time_us": t,
            "busbw_gbps": 1.0,
            "n_wrong": 0,
            "algorithm": col,
            **kw,
        }

    out = tables.pivot("t", [rec("flat", 100.0), rec("hierarchical", 250.0)], lambda r: r["algorithm"])
    assert out.splitlines()[-2].split()[-1] == "2.50" and "[OK]" in out
    c = {
        "direction": "h2d",
        "host_memory": "pinned",
        "size_bytes": 1 << 20,
        "time_us": 100.0,
        "algbw_gbps": 10.0,
        "nominal_peak_gbps": 25.2,
        "pct_of_peak": 39.7,
        "link": "PCIe gen4 x16",
        "n_wrong": 0,
        "bytes_moved_factor": 1,
    }
    assert "PCIe gen4 x16" in tables.copy_table([c])
    # records of the case protocol carry no pct_of_peak: the table derives it (10 GB/s of 25 = 40%)
    derived = {k: v for k, v in c.items() if k != "pct_of_peak"} | {"nominal_peak_gbps": 25.0}
    assert tables.copy_table([derived]).splitlines()[-1].split()[6] == "40.0"


def test_pcie_lane_rates_are_per_direction_payload():
    # 16 lanes of gen4 = 31.5 GB/s per direction (PCI-SIG 16 GT/s, 128b/130b)
    assert topology.PCIE_GBPS_PER_LANE[4] * 16 == pytest.approx(31.5, rel=0.01)


def test_hierarchy_shape_names_what_the_two_level_all_reduce_does():
    from suite.ops import algorithms

    assert algorithms.hierarchy_shape(((0, 1, 2, 3),)) == "reduce_broadcast"  # one node
    assert algorithms.hierarchy_shape(((0,), (1,))) == "leaders_all_reduce"  # one rank per node
    assert algorithms.hierarchy_shape(((0, 1), (2, 3))) == "hierarchical"
    assert algorithms.hierarchy_shape(((0, 1, 2), (3,))) == "hierarchical"
    assert set(algorithms.HIERARCHY_SHAPES) == {"hierarchical", "reduce_broadcast", "leaders_all_reduce"}


def test_hierarchical_table_on_one_node_says_reduce_broadcast():
    def rec(algo, t, **kw):
        return {
            "op": "all_reduce",
            "size_bytes": 4096,
            "dtype": "float32",
            "time_us": t,
            "busbw_gbps": 1.0,
            "n_wrong": 0,
            "algorithm": algo,
            "table": "hierarchical",
            "grouping_nodes": [[0, 1]],
            "fake_nodes": 0,
            **kw,
        }

    out = tables.format_tables([rec("flat", 100.0), rec("reduce_broadcast", 120.0, hierarchy="one node: ...")])
    assert "flat all_reduce vs reduce + broadcast (one node: no hierarchy" in out
    assert "hierarchical all_reduce" not in out and "reduce_broadcast" in out


def test_contiguity_table_shows_the_measured_copy_and_its_share():
    def rec(op, layout, t, **kw):
        return {
            "op": op,
            "layout": layout,
            "size_bytes": 4096,
            "dtype": "float32",
            "time_us": t,
            "busbw_gbps": 1.0,
            "n_wrong": 0,
            "table": "contiguity",
            **kw,
        }

    recs = [
        rec("copy", "transposed", 30.0, busbw_gbps=None),
        rec("all_reduce", "contiguous", 100.0),
        rec("all_reduce", "transposed", 120.0, copy_roundtrip_us=30.0, copy_share=0.25),
    ]
    out = tables.format_tables(recs)
    row = [ln for ln in out.splitlines() if ln.strip().startswith("all_reduce")][0].split()
    assert row[-4:] == ["1.20", "20.0", "30.0", "25%"]  # x first, transposed - contiguous, copy, share
    assert "hidden copy" not in out
