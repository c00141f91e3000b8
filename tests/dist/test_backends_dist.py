"""Backends and placement experiments on real Gloo groups, through the launcher users run.

One world-4 run covers both experiments with SUITE_FAKE_NODES=2 (ranks {0,1}
and {2,3} form two *simulated* nodes for the hierarchical all_reduce only;
hostnames and traffic stay real), sizes chosen so the ring's chunks are
uneven (25, 50, 100 float32 elements over 4 ranks). A world-3 run checks the
ring on an odd world.
"""

import math
import re

import pytest
import torch

from experiments.backends import cases as backends

from experiments.backends import workload as backends_workload
from suite.ops.collectives import REGISTRY
from suite import metrics
from suite.harness import groups
from suite.results import REQUIRED_FIELDS
from tests.conftest import load_bench, run_suite, shown, tables_of

pytestmark = pytest.mark.slow

UNEVEN = ["--min-bytes", "100", "--max-bytes", "400", "--step-factor", "2", "--iters", "2", "--warmup", "1"]


@pytest.fixture(scope="module")
def world4(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("w4")
    proc = run_suite(
        tmp,
        "--experiments",
        "backends,placement",
        *UNEVEN,
        "--dtypes",
        "float32,int64",
        nproc=4,
        timeout=400,
        env={"SUITE_FAKE_NODES": "2"},
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    run = load_bench(tmp)
    assert run["suite"]["complete"] is True
    return proc, [b["extra_info"] for b in run["benchmarks"]]


def _valid(recs):
    for r in recs:
        for f in REQUIRED_FIELDS:
            assert f in r, f"{f} missing in {r['experiment']}:{r['op']}"
        if r["checked"]:
            assert r["n_wrong"] == 0
        else:  # only what has no data: barrier latencies (capability, topology, barrier cases)
            assert r["n_wrong"] is None and r["unchecked_reason"] and r["size_bytes"] == 0
        if r["size_bytes"] and r.get("busbw_factor") is not None:
            assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * r["busbw_factor"], rel=1e-9)


def test_backends_records_lanes_and_capability_matrix(world4):
    proc, recs = world4
    recs = [r for r in recs if r["experiment"] == "backends"]
    _valid(recs)
    caps = [r for r in recs if r["op"] == "capability"]
    planned, missing = groups.plan_lanes("cpu")
    assert [c["lane"] for c in caps] == [ln.label for ln in planned]
    rows = caps[0]["capabilities"]
    # every registered variant and send_recv, for every dtype, probed
    assert {r["variant"] for r in rows} == {c.variant for c in REGISTRY} | {"send_recv"}
    assert {r["dtype"] for r in rows if r["variant"] == "send_recv"} == set(backends_workload.ALL_DTYPES)
    assert all(r["supported"] == (r["reason"] == "") for r in rows)
    assert next(r for r in rows if (r["variant"], r["dtype"], r["redop"]) == ("all_reduce", "float32", "sum"))[
        "supported"
    ]
    # the lanes the planner lacks, and the bare mpi4py lane, which runs only beside the MPI lane (mpiexec)
    assert {(m["backend"], m["device"]) for m in caps[0]["lanes_missing"]} == {
        (ln.backend, ln.device) for ln, _ in missing
    } | {("mpi4py", "numpy")}
    assert re.search(r"SKIPPED \[1\] .*the bare mpi4py lane runs beside the MPI lane only: .*BACKEND=mpi", proc.stdout)
    # side by side: every compared collective and send_recv, at the 3 largest sizes, both dtypes
    compare = [r for r in recs if r.get("table") == "compare"]
    assert {r["variant"] for r in compare} == set(backends.COMPARED_VARIANTS) | {"send_recv"}
    assert {r["dtype"] for r in compare if r["variant"] == "send_recv"} == {"float32", "int64"}
    assert "# capability matrix: gloo/cpu, 4 ranks" in tables_of(proc)
    # one host: every interface leads through the kernel loopback, so no interface comparison is measured
    assert not [r for r in recs if r.get("table") == "gloo_path"]
    assert re.search(
        r"SKIPPED \[2\] .*Gloo interface comparison not offered: all 4 ranks run on one host.*loopback", proc.stdout
    )
    if len(planned) == 1:
        assert "only one lane ran (gloo/cpu)" in tables_of(proc)


def test_ring_and_naive_all_reduce_equal_the_backend(world4):
    proc, recs = world4
    algo = [r for r in recs if r.get("table") == "algorithm"]
    _valid(algo)  # n_wrong counts both: vs the exact answer and vs the backend's result
    steps = [r for r in algo if r["op"] == "send_recv"]
    algo = [r for r in algo if r["op"] != "send_recv"]
    got = {(r["algorithm"], r["dtype"], r["count"]) for r in algo}
    want = {
        (a, d, c)
        for a in backends.ALGORITHMS
        for d, cs in (("float32", (25, 50, 100)), ("int64", (12, 25, 50)))
        for c in cs
    }
    assert got == want
    assert all(r["busbw_factor"] == metrics.busbw_factor("all_reduce", 4) == 1.5 for r in algo)
    assert all(r["timing_mode"] == "blocking" for r in algo)
    # the ring's own step beside it: one chunk of ceil(count/4) elements, per all_reduce size and dtype
    assert {(r["dtype"], r["all_reduce_size_bytes"], r["count"]) for r in steps} == {
        (r["dtype"], r["size_bytes"], -(-r["count"] // 4)) for r in algo
    }
    assert "all_reduce algorithms (4 ranks" in tables_of(proc)


def test_placement_cpu_cases_on_a_simulated_two_node_layout(world4):
    proc, recs = world4
    recs = [r for r in recs if r["experiment"] == "placement"]
    _valid(recs)
    by = {}
    for r in recs:
        by.setdefault(r["table"], []).append(r)
    topo = by["topology"][0]
    assert topo["nodes"] == [0, 0, 0, 0] and topo["grouping_nodes"] == [0, 0, 1, 1] and topo["fake_nodes"] == 2
    assert len(topo["ranks"]) == 4 and all(r["affinity"] for r in topo["ranks"])
    hier = by["hierarchical"]
    assert {r["algorithm"] for r in hier} == {"flat", "hierarchical"}
    assert all(r["grouping_nodes"] == [[0, 1], [2, 3]] for r in hier)
    assert {r["placement"] for r in by["pairs"]} == {"intra"} and {r["placement"] for r in by["groups"]} == {"intra"}
    assert [r["pinning"] for r in by["affinity"]] == ["unpinned", "pinned"]  # no torch-threads axis
    assert all("threads" not in r for r in by["affinity"]) and by["affinity"][1]["pinned_core"] is not None
    assert {r["algorithm"] for r in hier} == {"flat", "hierarchical"}  # two fake nodes of two ranks: two levels
    contig = by["contiguity"]
    assert {(r["op"], r["layout"]) for r in contig} == {
        (o, lay) for o in ("all_reduce", "send_recv") for lay in ("contiguous", "transposed")
    } | {("copy", "transposed")}
    # the copy is measured (its own checked case), and every transposed record carries that time and its share
    copies = {r["size_bytes"]: r for r in contig if r["op"] == "copy"}
    transposed = [r for r in contig if r["layout"] == "transposed" and r["op"] != "copy"]
    assert copies and all(r["checked"] and r["n_wrong"] == 0 for r in copies.values())
    for r in transposed:
        assert r["copy_roundtrip_us"] == copies[r["size_bytes"]]["time_us"] > 0
        assert r["copy_share"] == pytest.approx(r["copy_roundtrip_us"] / r["time_us"], rel=1e-9)
        assert "hidden_copy" not in r and r["provenance"]["copy_roundtrip_us"].startswith("measured")
    send = [r for r in contig if r["op"] == "send_recv"]
    assert all(r["send_accepts_noncontiguous"] is False and "contiguous" in r["send_noncontiguous_error"] for r in send)
    # inter-node cases say why they cannot run on one host (the fake layout is for grouping only)
    assert re.search(r"SKIPPED \[\d+\] .*all 4 ranks run on one host", proc.stdout)
    assert "SUITE_FAKE_NODES=2 groups them as [0, 0, 1, 1]" in shown(proc)


def test_one_node_names_reduce_broadcast_and_transposed_cases_measure_their_copy(tmp_path):
    """Two ranks, no fake nodes: the "hierarchical" case is recorded as what it is on one node
    (reduce + broadcast); without the copy cases (deselected) the transposed cases measure the copy
    round trip themselves."""
    proc = run_suite(
        tmp_path,
        "--experiments",
        "placement",
        *UNEVEN,
        "--",
        "-k",
        "hierarchical or (contiguity and not copy)",
        nproc=2,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    hier = [r for r in recs if r["table"] == "hierarchical"]
    assert {r["algorithm"] for r in hier} == {"flat", "reduce_broadcast"} and len(hier) == 6
    assert all(r["label"].startswith(("flat", "reduce_broadcast")) for r in hier)
    assert all("not hierarchical" in r["hierarchy"] for r in hier if r["algorithm"] != "flat")
    assert "flat all_reduce vs reduce + broadcast (one node: no hierarchy" in tables_of(proc)
    assert "flat vs hierarchical" not in shown(proc)
    contig = [r for r in recs if r["table"] == "contiguity"]
    assert not [r for r in contig if r["op"] == "copy"]
    transposed = [r for r in contig if r["layout"] == "transposed"]
    assert len(transposed) == 4
    for r in transposed:  # the copy measured by the case itself (no copy case ran), its share by the formula
        assert math.isfinite(r["copy_roundtrip_us"]) and r["copy_roundtrip_us"] > 0
        assert r["copy_share"] == pytest.approx(r["copy_roundtrip_us"] / r["time_us"], rel=1e-9)
        assert r["provenance"]["copy_roundtrip_us"].startswith("measured: median time (blocking, cross-rank max)")
        assert r["provenance"]["copy_share"] == "derived: copy_roundtrip_us / time_us"
    # (25 elements have no non-contiguous transpose: 50 and 100) one measurement per size, shared by
    # the all_reduce and the send_recv of that size
    by_size = {}
    for r in transposed:
        by_size.setdefault(r["size_bytes"], set()).add(r["copy_roundtrip_us"])
    assert all(len(v) == 1 for v in by_size.values())


def test_gpu_cases_skip_with_a_reason_without_cuda(world4):
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA: the GPU cases run (make bench-gpu) instead of skipping")
    proc, recs = world4
    assert not [r for r in recs if r.get("table") in ("gpu_placement", "gpu_staging", "copy")]
    skipped = re.findall(r"SKIPPED \[(\d+)\] \S+: (GPU placement case: .*)", proc.stdout)
    assert skipped and all("no CUDA" in reason for _, reason in skipped)
    # 4 placements + 4 staging variants at 3 sizes, 5 copy kinds at the 3 sizes of the sweep
    assert sum(int(n) for n, _ in skipped) == 4 * 3 + 4 * 3 + 5 * 3


def test_ring_on_an_odd_world_and_its_step_timed_like_it(tmp_path):
    """World 3, run in pipelined mode: the ring, the backend and the ring's p2p step are all timed blocking
    (the side-by-side send_recv keeps the run's mode), the step at the ring's chunk size."""
    proc = run_suite(
        tmp_path,
        "--experiments",
        "backends",
        *UNEVEN,
        "--timing",
        "pipelined",
        "--",
        "-k",
        "algorithm or capability or send_recv",
        nproc=3,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    algo = [r for r in recs if r.get("table") == "algorithm"]
    assert len(algo) == 12 and all(r["n_wrong"] == 0 and r["world_size"] == 3 for r in algo)
    assert all(r["timing_mode"] == "blocking" for r in algo)
    steps = {r["all_reduce_size_bytes"]: r for r in algo if r["op"] == "send_recv"}
    for r in algo:
        if r["algorithm"] == "ring_p2p":  # 25, 50, 100 elements over 3 ranks: chunks of 9, 17, 34
            assert steps[r["size_bytes"]]["count"] == -(-r["count"] // 3)
            assert r["link_bytes_per_message"] == steps[r["size_bytes"]]["size_bytes"] and r["link_messages"] == 4
    side = [r for r in recs if r.get("table") == "compare" and r["op"] == "send_recv"]
    assert side and all(r["timing_mode"] == "pipelined" for r in side)
    assert "timing=blocking for every column" in tables_of(proc)


def test_planted_corruption_in_ring_and_hierarchical_is_caught(tmp_path):
    proc = run_suite(
        tmp_path,
        "--experiments",
        "backends,placement",
        *UNEVEN,
        "--max-bytes",
        "100",
        "--",
        "-k",
        "ring_p2p or hierarchical",
        nproc=2,
        timeout=300,
        env={"SUITE_INJECT_CORRUPTION": "ring_p2p,hierarchical", "SUITE_FAKE_NODES": "2"},
    )
    assert proc.returncode == 6, proc.stdout[-3000:]  # EXIT_WRONG_RESULT
    failed = re.findall(r"_{3,} (test_\w+)\[([^\]]+)\] _{3,}\n(\d+) wrong element", proc.stdout)
    assert {(t, case) for t, case, _ in failed} == {
        ("test_all_reduce_algorithm", "gloo-cpu-ring_p2p-float32-100B"),
        ("test_hierarchical", "hierarchical-float32-100B"),
    }, proc.stdout[-3000:]
    # on each of the 2 ranks one flipped element, counted once (it differs from the exact sum and from
    # the backend's result)
    assert all(int(n) == 2 for _, _, n in failed)
