"""The "link k× slower" what-if on the link's α–β model (suite/postmortem/replay/link.py): only the bandwidth
term c_β·S/β of the transfers that cross the link is scaled; latency and the CPU's reduction stay. A planted
step whose transfer is part latency and reduction, part bandwidth: scaling the whole transfer overshoots the step
with the slower link, the α–β pricing gives it. Times in milliseconds, written as seconds."""

from __future__ import annotations

import json

import pytest

from suite.postmortem.replay import cli, link
from suite.postmortem.replay.graph import RankStep, build, key_ops
from suite.postmortem.replay.whatif import WhatIf, changed

MS = 1e-3
S = 4_000_000  # the all_reduce's bytes: at β = 1 GB/s and c_β = 1 (two ranks), 4 ms of the link's bandwidth term


def ddp_step(beta_gbps: float = 1.0, n: int = 2) -> list[RankStep]:
    """``n`` ranks: 10 ms of backward, an all_reduce of S bytes taking 2 ms of latency and reduction (which the
    link's rate does not change) plus c_β·S/β, 1 ms of optimizer."""
    ar = 2 + 2 * (n - 1) / n * S / (beta_gbps * 1e9) / MS
    steps = []
    for r in range(n):
        ops = key_ops([("all_reduce", 10 * MS, (10 + ar) * MS)])
        steps.append(RankStep(r, 0.0, (10 + ar + 1) * MS, ops))
    return steps


def test_only_the_bandwidth_term_of_a_transfer_is_scaled():
    assert link.link_transfer(10 * MS, 6 * MS, 2.0) == pytest.approx(16 * MS)
    assert link.link_transfer(10 * MS, 6 * MS, 0.5) == pytest.approx(7 * MS)
    assert link.link_transfer(3 * MS, 6 * MS, 2.0) == pytest.approx(6 * MS)  # the term is at most the transfer


def test_a_slower_link_priced_on_alpha_beta_gives_the_shaped_step_where_whole_scaling_overshoots():
    base, shaped = build(ddp_step(beta_gbps=1.0)), build(ddp_step(beta_gbps=0.5))
    wire = link.wire_seconds(base.peers, (0, 1), {"all_reduce": [S]}, beta_gbps=1.0)
    assert wire == {("all_reduce", 0): pytest.approx(4 * MS)}
    assert shaped.measured == pytest.approx((10 + 2 + 8 + 1) * MS)
    whole = changed(base, WhatIf("link", (0, 1), 2.0), {})
    priced = changed(base, WhatIf("link", (0, 1), 2.0, wire=wire), {})
    assert whole == pytest.approx((10 + 12 + 1) * MS)  # the 2 ms of latency and reduction doubled as well
    assert priced == pytest.approx(shaped.measured)
    assert changed(base, WhatIf("link", (0, 1), 0.5, wire=wire), {}) == pytest.approx((10 + 2 + 2 + 1) * MS)


def test_a_link_that_is_not_an_edge_of_the_ring_carries_none_of_it():
    g = build(ddp_step(n=4))
    sizes = {"all_reduce": [S]}
    assert link.wire_seconds(g.peers, (0, 2), sizes, 1.0) == {("all_reduce", 0): 0.0}
    closing = link.wire_seconds(g.peers, (3, 0), sizes, 1.0)[("all_reduce", 0)]
    assert closing == pytest.approx(1.5 * S / 1e9)  # 2(n-1)/n of S at n = 4
    assert link.wire_seconds(g.peers, (0, 1), {}, 1.0) == {("all_reduce", 0): 0.0}  # size unknown: unchanged


def test_op_sizes_come_from_the_record():
    assert link.op_sizes({"bucket_sizes": [10, 30]}, {"all_reduce"}) == {"all_reduce": [10.0, 30.0]}
    inv = [
        {"op": "all_gather", "bytes": 100, "count": 2},
        {"op": "all_gather", "bytes": 400, "count": 1},
        {"op": "reduce_scatter", "bytes": 50, "count": 4},
    ]
    assert link.op_sizes({"inventory": inv}, {"all_gather", "all_reduce"}) == {
        "all_gather": [200.0],
        "all_reduce": [50.0],  # Gloo runs the reduce_scatter as an all_reduce: the profile names it so
    }
    assert link.wire_seconds({("all_reduce", 1): [0, 1]}, (0, 1), {"all_reduce": [10.0, 30.0]}, 1e-9) == {
        ("all_reduce", 1): pytest.approx(30.0)
    }


def _run(hosts: list[str], env: dict) -> dict:
    info = {"suite": {"hostnames": hosts, "n_hosts": len(set(hosts)), "hosts": {h: {"env": env} for h in hosts}}}
    return {"machine_info": info, "benchmarks": [{"name": "c", "extra_info": {"world_size": 2}}]}


def test_the_links_beta_is_the_runs_declared_rate_between_hosts_and_none_within_one():
    beta, how = link.figure(_run(["node0", "node1"], {"LINK_RATE": "400mbit"}), (0, 1))
    assert beta == pytest.approx(0.05) and how == "inter-node link: LINK_RATE=400mbit (declared)"
    assert link.figure(_run(["host"], {}), (0, 1)) is None


def _stored_run(tmp_path, ops=((10_000, 30_000), (12_000, 68_000)), step_us=80_000, n=2, cores=None):
    """A hand-made run of ``n`` ranks on as many hosts (LINK_RATE=400mbit declared) with one timed step of the case
    ``c`` (``step_us``) whose all_reduces, DDP's buckets of 1 MB and 3 MB, run at ``ops`` ((start, duration) µs);
    ``cores``: each host's usable cores, where recorded."""
    epoch, events = 1_000.0, []
    for r in range(n):
        events += [{"ph": "X", "cat": "case", "name": "c", "pid": 1, "tid": r + 1, "ts": 0, "dur": 200_000}]
        events += [{"ph": "X", "cat": "sample", "name": "step", "pid": 1, "tid": r + 1, "ts": 0, "dur": step_us}]
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "trace.json").write_text(json.dumps({"traceEvents": events, "otherData": {"epoch_unix_s": epoch}}))
    (tmp_path / "profiles").mkdir()
    for r in range(n):
        evs = [{"ph": "X", "name": "gloo:all_reduce", "ts": ts, "dur": d, "pid": 1, "tid": 9} for ts, d in ops]
        doc = {"traceEvents": evs, "baseTimeNanoseconds": int(epoch * 1e9)}
        (tmp_path / "profiles" / f"c.rank{r}.json").write_text(json.dumps(doc))
    run = _run([f"node{r}" for r in range(n)], {"LINK_RATE": "400mbit"})
    run["benchmarks"][0]["extra_info"].update(bucket_sizes=[1_000_000, 3_000_000], samples_us=[float(step_us)])
    for h in run["machine_info"]["suite"]["hosts"].values():
        h["cpu_share"] = {"ranks": 1, "usable_cpus": cores} if cores else {}
    (tmp_path / "bench.json").write_text(json.dumps(run))
    return tmp_path


def test_make_what_if_prices_the_link_of_a_stored_run(tmp_path, capsys):
    """`python -m suite.postmortem.replay RUN --what-if link:0-1:2` (make what-if) on a hand-made 2-host run: an
    80 ms step whose two all_reduces, DDP's buckets of 1 MB and 3 MB (20 and 60 ms of bandwidth term at the
    declared 400 Mbit/s), run from 10 to 40 ms and from 12 ms to the step's end; each bucket's term lengthens its
    all_reduce, and the second ends the step."""
    _stored_run(tmp_path)
    assert cli.main([str(tmp_path), "--what-if", "link:0-1:2"]) == 0
    (w,) = json.loads((tmp_path / "what-if.json").read_text())["cases"][0]["whatifs"]
    assert w["step_ms"] == pytest.approx(80 + 60)  # the last bucket's 60 ms term once more; whole: 80 + 68
    assert "LINK_RATE=400mbit" in w["priced"] and "bucket_sizes" in w["priced"]
    assert "what if link 0-1 2x slower: 140.000 ms" in capsys.readouterr().out


def test_n_ranks_move_each_transfer_by_the_ring_model():
    """An all_reduce of 1 MB from 2 to 4 ranks: 2 more latency steps each way (6 - 2) and a bandwidth factor of
    1.5 for 1 (2(N-1)/N): at α 10 µs and β 1 GB/s, 40 µs + 0.5 x 1 ms more; a barrier, not in the model, keeps."""
    peers = {("all_reduce", 0): [0, 1], ("barrier", 0): [0, 1]}
    extra = link.at_ranks(peers, 4, {"all_reduce": [1e6]}, alpha_us=10.0, beta_gbps=1.0)
    assert extra == {("all_reduce", 0): pytest.approx(40e-6 + 0.5e-3), ("barrier", 0): 0.0}


def test_make_what_if_prices_n_ranks_on_the_ring_model_and_a_probes_compute(tmp_path, capsys):
    """The stored 2-host run at 4 ranks: each bucket's bandwidth term 1.5 times its 2-rank one (+10 and +30 ms at
    400 Mbit/s), so the last bucket ends at 12 + 68 + 30 = 110 ms. With a probe run at 4 ranks whose buckets start
    at 20 and 24 ms and whose step ends 6 ms after the last: 24 + 68 + 30 + 6 = 128 ms. On hosts of 1 core each
    and no probe, the what-if says the wait for a core is not priced."""
    run = _stored_run(tmp_path / "run", cores=1)
    probe = _stored_run(tmp_path / "probe", ops=((20_000, 30_000), (24_000, 80_000)), step_us=110_000, n=4)
    assert cli.main([str(run), "--what-if", "ranks:4"]) == 0
    (w,) = json.loads((run / "what-if.json").read_text())["cases"][0]["whatifs"]
    assert w["what"] == "4 ranks" and w["step_ms"] == pytest.approx(110)
    assert "ring model from 2 to 4 ranks: β 0.05 GB/s" in w["priced"] and "α unknown" in w["priced"]
    assert "2 ranks share 1 core but no probe ran at 4 ranks: the contention is not priced" in w["priced"]
    assert cli.main([str(run), "--what-if", "ranks:4", "--probe", str(probe)]) == 0
    (w,) = json.loads((run / "what-if.json").read_text())["cases"][0]["whatifs"]
    assert w["step_ms"] == pytest.approx(128) and "measured on all 4 ranks at once" in w["priced"]
    assert cli.main([str(run), "--what-if", "ranks:3", "--probe", str(probe)]) == 0  # the probe is at 4
    (w,) = json.loads((run / "what-if.json").read_text())["cases"][0]["whatifs"]
    assert w["step_ms"] is None and "has no rebuilt step of c at 3 ranks" in w["priced"]
    assert "what if 3 ranks: not priced: the probe" in capsys.readouterr().out
    assert cli.main([str(run), "--what-if", "ranks:4", "--probe", str(tmp_path / "none")]) == 2
    assert (
        capsys.readouterr().err == f"error: PROBE={tmp_path / 'none'}: not a run folder with a timeline (trace.json)\n"
    )


@pytest.mark.parametrize("spec", ["ranks:1", "ranks:x", "ranks:4:2"])
def test_n_ranks_is_a_whole_number_from_2(spec, capsys):
    assert cli.main(["somewhere", "--what-if", spec]) == 2
    assert capsys.readouterr().err == f"error: WHATIF={spec}: expected ranks:<N>, N a whole number of ranks from 2\n"


def test_the_validation_table_says_how_the_link_was_priced():
    from suite.postmortem.replay.validate import link_table

    row = {"case": "c", "base_ms": 100.0, "shaped_ms": 150.0, "replay_error_pct": 0.5, "vs_record_pct": 1.0}
    text = link_table([{**row, "predicted_ms": 140.0, "error_pct": 6.7, "priced": "α–β: β 0.05 GB/s"}], 2.0)
    # the replay error against the timeline, and against the record in brackets, as in the straggler table
    assert "| c | 100.00 | 150.00 | 0.5% (1%) | 140.00 | 6.7% |" in text
    assert text.endswith("- c, the link what-if priced by α–β: β 0.05 GB/s\n")
