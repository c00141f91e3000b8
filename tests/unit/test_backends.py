"""Pure logic of the backends experiment and its tables (no process group)."""

import pytest
import torch
import torch.distributed as dist

from experiments.backends import cases as backends

from experiments.backends import workload as backends_workload
from experiments.backends import table as tables
from suite.harness import groups
from suite.ops import algorithms
from suite.system import network


def test_plan_lanes_reports_every_missing_lane_with_a_reason():
    run, missing = groups.plan_lanes("cpu", env={})
    keys = {ln.key for ln in run}
    assert ("gloo-cpu" in keys) == dist.is_gloo_available()
    assert not any(ln.device == "cuda" for ln in run)  # a CPU run never gets CUDA lanes
    reasons = {ln.key: r for ln, r in missing}
    assert keys.isdisjoint(reasons) and keys | set(reasons) == {ln.key for ln in groups.CANDIDATE_LANES}
    if not dist.is_nccl_available():
        assert "not built into torch" in reasons["nccl-cuda"]
    if not torch.cuda.is_available():
        assert reasons["gloo-cuda"]
    if dist.is_mpi_available():
        assert "mpirun" in reasons["mpi-cpu"]


def test_lanes_count_the_ranks_on_this_node_as_init_distributed_does():
    # NCCL's one-GPU-per-rank rule needs the ranks on this node: torchrun's LOCAL_WORLD_SIZE, or Slurm's
    # SLURM_NTASKS_PER_NODE when srun starts the ranks itself (read_launch_env, as init_distributed)
    torchrun = {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
    assert groups._local_world(torchrun) == 2
    slurm = {"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_LOCALID": "0", "SLURM_NTASKS_PER_NODE": "4(x2)"}
    assert groups._local_world(slurm) == 4
    assert groups._local_world({}) == 1
    assert groups._local_world({"RANK": "0", "WORLD_SIZE": "two"}) == 1  # the launcher reports it


def test_mpi_lane_needs_an_mpi_launcher():
    assert not groups._mpi_launched({})
    assert groups._mpi_launched({"OMPI_COMM_WORLD_SIZE": "4"})


def _route(iface, net, metric=0):
    import ipaddress

    n = ipaddress.IPv4Network(net)
    le = [int(x).to_bytes(4, "little").hex().upper() for x in (n.network_address, n.netmask)]
    return f"{iface}\t{le[0]}\t00000000\t0001\t0\t0\t{metric}\t{le[1]}\t0\t0\t0"


HEAD = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT"


def test_route_interface_takes_the_longest_prefix():
    table = "\n".join([HEAD, _route("eth0", "0.0.0.0/0"), _route("eth0", "10.0.0.0/16"), _route("eth1", "10.0.1.0/24")])
    assert network.route_interface("10.0.1.7", table) == "eth1"
    assert network.route_interface("10.0.2.7", table) == "eth0"
    assert network.route_interface("8.8.8.8", table) == "eth0"
    assert network.route_interface("8.8.8.8", "\n".join([HEAD, _route("eth1", "10.0.1.0/24")])) is None


def _rank(host, *ifaces, routes=()):
    lo = {"name": "lo", "address": "127.0.0.1", "prefix": 8, "loopback": True}
    return {
        "host": host,
        "interfaces": [lo] + [{"name": n, "address": a, "prefix": p, "loopback": False} for n, a, p in ifaces],
        "routes": "\n".join([HEAD, *routes]),
    }


def test_interface_paths_are_not_offered_on_one_host():
    ranks = [_rank("h", ("eth0", "10.0.0.1", 24), ("eth1", "10.1.0.1", 24))] * 2
    paths, why = network.interface_paths(ranks)
    assert paths == [] and "one host" in why and "loopback" in why


def test_interface_paths_need_two_interfaces_with_routes_of_their_own():
    two_nets = [_route("eth0", "10.0.0.0/24"), _route("eth1", "10.1.0.0/24")]
    a = _rank("a", ("eth0", "10.0.0.1", 24), ("eth1", "10.1.0.1", 24), routes=two_nets)
    b = _rank("b", ("eth0", "10.0.0.2", 24), ("eth1", "10.1.0.2", 24), routes=two_nets)
    paths, why = network.interface_paths([a, a, b, b])
    assert why is None and paths == [
        {"name": "eth0", "network": "10.0.0.0/24"},
        {"name": "eth1", "network": "10.1.0.0/24"},
    ]
    # one network per host: nothing to compare
    one = [_rank(h, ("eth0", f"10.0.0.{i}", 24), routes=two_nets[:1]) for i, h in ((1, "a"), (2, "b"))]
    paths, why = network.interface_paths(one)
    assert paths == [] and "fewer than two" in why and "eth0 (10.0.0.0/24)" in why
    # a second interface on the same network: the kernel sends the peer's address through the first one
    same = [_route("eth0", "10.0.0.0/24"), _route("eth1", "10.0.0.0/24", metric=10)]
    c = _rank("a", ("eth0", "10.0.0.1", 24), ("eth1", "10.0.0.11", 24), routes=same)
    d = _rank("b", ("eth0", "10.0.0.2", 24), ("eth1", "10.0.0.12", 24), routes=same)
    paths, why = network.interface_paths([c, d])
    assert paths == [] and "eth1: a reaches b's 10.0.0.12 via eth0" in why


def test_local_interfaces_mark_the_loopback():
    ifaces = network.local_interfaces()
    lo = [i for i in ifaces if i["address"].startswith("127.")]
    assert lo and all(i["loopback"] for i in lo)
    assert all(0 <= i["prefix"] <= 32 for i in ifaces)


def test_model_bytes_match_the_all_reduce_busbw_factor():
    from suite import metrics

    for n in (2, 3, 4, 8):
        s = 1 << 20
        ring = backends.model_bytes_busiest_rank("ring_p2p", s, n)
        assert ring == pytest.approx(s * metrics.busbw_factor("all_reduce", n))
        assert backends.model_bytes_busiest_rank("reduce_broadcast", s, n) == (n - 1) * s
    assert backends.model_bytes_busiest_rank("all_reduce", 8, 2) is None


@pytest.mark.parametrize("numel,n", [(0, 3), (1, 4), (5, 4), (24, 4), (25, 3)])
def test_ring_chunks_cover_the_buffer_like_tensor_split(numel, n):
    chunks = algorithms.ring_chunks(numel, n)
    want = [t.numel() for t in torch.arange(numel).tensor_split(n)]
    assert [ln for _, ln in chunks] == want
    assert sum(ln for _, ln in chunks) == numel
    assert all(chunks[i][0] + chunks[i][1] == chunks[i + 1][0] for i in range(n - 1))


def _rec(lane, variant, size, time_us, **kw):
    backend, device = lane.split("/")
    return {
        "experiment": "backends",
        "op": variant.split(":")[0],
        "variant": variant,
        "backend": backend,
        "device": device,
        "lane": lane,
        "dtype": "float32",
        "world_size": 4,
        "size_bytes": size,
        "count": size // 4,
        "in_place": True,
        "timing_mode": "blocking",
        "iterations": 3,
        "time_us": time_us,
        "p95_us": time_us,
        "algbw_gbps": size / time_us / 1e3,
        "busbw_gbps": 1.5 * size / time_us / 1e3,
        "n_wrong": 0,
        **kw,
    }


def test_compare_table_single_lane_says_why_there_are_no_ratios():
    cap = _rec(
        "gloo/cpu",
        "capability",
        0,
        10.0,
        table="capability",
        capabilities=[],
        lanes_missing=[{"backend": "nccl", "device": "cuda", "reason": "nccl is not built into torch X"}],
    )
    out = tables.format_tables([cap, _rec("gloo/cpu", "all_reduce", 1024, 100.0, table="compare")])
    assert "only one lane ran (gloo/cpu)" in out and "nccl/cuda (nccl is not built into torch X)" in out


def test_compare_table_shows_ratio_to_the_first_lane():
    recs = [
        _rec("nccl/cuda", "all_reduce", 1024, 50.0, table="compare"),
        _rec("gloo/cuda", "all_reduce", 1024, 200.0, table="compare"),
    ]
    out = tables.format_tables(recs)
    row = [ln for ln in out.splitlines() if ln.strip().startswith("all_reduce")][0]
    assert row.split()[-1] == "4.00"
    assert "only one lane" not in out


def test_capability_table_numbers_reasons():
    rows = [
        {
            "op": "all_reduce",
            "variant": "all_reduce",
            "backend": "gloo",
            "device": "cpu",
            "dtype": d,
            "redop": "avg",
            "in_place": True,
            "supported": d == "float32",
            "reason": "" if d == "float32" else f"no avg for {d}",
        }
        for d in ("float32", "int32")
    ]
    cap = _rec("gloo/cpu", "capability", 0, 10.0, table="capability", capabilities=rows, lanes_missing=[])
    out = tables.format_tables([cap])
    line = [ln for ln in out.splitlines() if "all_reduce(avg)" in ln][0]
    assert line.split()[1:] == ["yes", "NO[1]"]
    assert "[1] no avg for int32" in out and "1/2 forms supported" in out


def _algorithm_recs():
    recs = [
        _rec(
            "gloo/cpu",
            f"all_reduce:{a}",
            4096,
            t,
            table="algorithm",
            algorithm=a,
            link_messages=backends.link_bytes(a, 1024, 4, 4)[1],
        )
        for a, t in (("all_reduce", 100.0), ("ring_p2p", 150.0), ("reduce_broadcast", 300.0))
    ]
    step = _rec(
        "gloo/cpu",
        "send_recv:p2p_step",
        1024,
        20.0,
        table="algorithm",
        algorithm="p2p_step",
        all_reduce_size_bytes=4096,
    )
    return recs, step


def test_algorithm_table_sets_the_ring_beside_its_own_step():
    recs, step = _algorithm_recs()
    # a send_recv of the whole buffer in another timing mode (the side-by-side table's) must not be used
    whole = _rec("gloo/cpu", "send_recv", 4096, 40.0, table="compare", timing_mode="pipelined")
    out = tables.format_tables(recs + [step, whole])
    assert "2(n-1)/n = algbw x 1.500" in out and "timing=blocking for every column" in out
    row = [ln for ln in out.splitlines() if ln.strip().startswith("gloo/cpu") and " 4096 " in ln][-1].split()
    # ring/ar, naive/ar, then the step: its chunk, time, GB/s, and ring / (2(n-1) x step) = 150 / (6 x 20)
    assert row[-6:] == ["1.50", "3.00", "1024", "20.0", f"{step['busbw_gbps']:.3f}", "1.25"]


def test_algorithm_table_says_the_timing_modes_it_mixes():
    recs, step = _algorithm_recs()
    step["timing_mode"] = "pipelined"
    assert "timing=blocking/pipelined" in tables.format_tables(recs + [step])


@pytest.mark.parametrize("n", [2, 3, 4])
def test_algorithm_cases_time_the_ring_step_at_its_chunk_and_blocking(n):
    from suite.common.config import build_config

    cfg = build_config(min_bytes="100", max_bytes="400", step_factor=2, timing_mode="pipelined")
    cases = backends.algorithm_cases(cfg, n)
    assert all(c.timing.mode == "blocking" for c in cases)
    steps = [c for c in cases if c.op == "send_recv"]
    rings = {c.bytes.size_bytes: c for c in cases if c.identity["algorithm"] == "ring_p2p"}
    assert len(steps) == len(rings) == 3
    for c in steps:
        ring = rings[c.identity["all_reduce_size_bytes"]]
        chunk = -(-ring.bytes.count // n)  # ceil: the largest ring chunk
        assert c.bytes.count == chunk and c.bytes.size_bytes == chunk * 4 < ring.bytes.size_bytes
        assert ring.fields["link_bytes_per_message"] == c.fields["link_bytes_per_message"] == chunk * 4
        assert ring.fields["link_messages"] == 2 * (n - 1) and c.fields["link_messages"] == 1


def test_a_lane_the_ranks_did_not_plan_skips_with_its_reason():
    """Cases are declared from the run's config; a lane the ranks' own plan lacks skips with the reason
    (not a KeyError)."""
    from suite.case import CaseSkipped, Session

    session = Session()
    nccl = groups.Lane("nccl", "cuda")
    session.once("backends.lanes", lambda: groups.Lanes(ctx={}, failed={}, missing=[(nccl, "no CUDA here")]))
    with pytest.raises(CaseSkipped, match="nccl/cuda: no CUDA here"):
        backends_workload.on_lane("nccl-cuda")(None, session)


def test_gloo_path_table_names_interface_and_network():
    recs = [
        _rec(
            "gloo/cpu", "all_reduce", 1 << 20, t, table="gloo_path", gloo_path=p, gloo_socket_ifname=i, gloo_network=net
        )
        for p, i, net, t in (
            ("interface_1", "eth0", "10.0.0.0/24", 900.0),
            ("interface_2", "eth1", "10.1.0.0/24", 450.0),
        )
    ]
    out = tables.format_tables(recs)
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith("interface_")]
    assert [r[:3] for r in rows] == [["interface_1", "eth0", "10.0.0.0/24"], ["interface_2", "eth1", "10.1.0.0/24"]]


def _measured(samples, mode="blocking", ops=1):
    from types import SimpleNamespace

    return SimpleNamespace(samples_s=samples, timing_mode=mode, ops_per_sample=ops)


def test_a_lane_carries_its_ratio_over_each_earlier_lane_with_an_interval():
    from experiments.backends import ratios

    gloo, mpi = _measured([4.0, 5.0, 6.0, 5.0, 5.0]), _measured([1.0, 1.0, 1.2, 0.9, 1.0])
    got = ratios.ratios_over(_measured([0.5, 0.5, 0.6, 0.4, 0.5]), {"gloo/cpu": gloo, "mpi/cpu": mpi})
    by = {r["over"]: r for r in got}
    assert by["gloo/cpu"]["ratio"] == pytest.approx(0.5 / 5.0) and by["mpi/cpu"]["ratio"] == pytest.approx(0.5)
    assert all(r["ci_low"] <= r["ratio"] <= r["ci_high"] and r["confidence"] == 0.95 for r in got)
    # timed another way (pipelined, or another depth): no ratio, rather than one of unlike things
    assert ratios.ratios_over(_measured([1.0]), {"gloo/cpu": _measured([2.0], mode="pipelined")}) == []
    assert ratios.ratios_over(_measured([1.0], "pipelined", 8), {"gloo/cpu": _measured([2.0], "pipelined", 4)}) == []


def test_ratio_interval_is_the_bootstrap_of_both_cases_samples_and_repeats():
    from suite.report.compare.stats import ratio_interval

    base, new = [10.0, 11.0, 9.0, 10.0, 12.0, 10.0], [5.0, 5.5, 4.5, 5.0, 6.0, 5.0]
    ratio, lo, hi = ratio_interval(base, new)
    assert ratio == pytest.approx(0.5) and lo < ratio < hi
    assert ratio_interval(base, new) == (ratio, lo, hi)  # a fixed seed: every rank states the same interval
    assert ratio_interval([10.0] * 6, [5.0] * 6) == (0.5, pytest.approx(0.5), pytest.approx(0.5))


def _three_lanes(op="all_reduce", size=1024):
    gloo = _rec("gloo/cpu", op, size, 100.0, table="compare", ratios=[])
    mpi = _rec("mpi/cpu", op, size, 40.0, table="compare")
    mpi["ratios"] = [{"over": "gloo/cpu", "ratio": 0.4, "ci_low": 0.35, "ci_high": 0.45, "confidence": 0.95}]
    bare = _rec("mpi4py/numpy", op, size, 10.0, table="compare", mpi_library="MPICH Version: 5.0.2")
    bare["ratios"] = [
        {"over": "gloo/cpu", "ratio": 0.1, "ci_low": 0.08, "ci_high": 0.125, "confidence": 0.95},
        {"over": "mpi/cpu", "ratio": 0.25, "ci_low": 0.2, "ci_high": 0.5, "confidence": 0.95},
    ]
    return [gloo, mpi, bare]


def test_compare_table_shows_each_lanes_ratio_with_its_interval():
    out = tables.format_tables(_three_lanes())
    row = [ln for ln in out.splitlines() if ln.strip().startswith("all_reduce")][0]
    assert row.split()[-4:] == ["0.4", "[0.35-0.45]", "0.1", "[0.08-0.125]"]
    assert "95% interval" in out


def test_the_process_group_table_inverts_the_bare_lanes_ratio_over_mpi():
    out = tables.process_group_table(_three_lanes())
    row = [ln for ln in out.splitlines() if ln.strip().startswith("all_reduce")][0].split()
    # torch 40 us, bare 10 us: torch takes 4x the bare call [1/0.5, 1/0.2], 30 us more
    assert row[3:] == ["40.0", "10.0", "4", "[2-5]", "30.0"]
    assert "MPICH Version: 5.0.2" in out
    assert tables.process_group_table(_three_lanes()[:2]) is None  # no bare lane: no such table


def test_headline_gives_each_lanes_ratio_with_its_interval():
    clause = tables.headline({}, _three_lanes())
    assert "mpi/cpu takes 0.40x [95% CI 0.35-0.45] gloo/cpu's time" in clause.text
    assert "mpi4py/numpy takes 0.10x [95% CI 0.08-0.12] gloo/cpu's time" in clause.text
