"""The sharded experiment through the launcher users run (real Gloo groups of 2 and 4 ranks): every strategy
trains what one process trains, its collectives are what the model's structure predicts and what
CommDebugMode counted, a planted wrong sharding exits 6, a bad knob exits 2 before any rank starts."""

import pytest

from experiments.sharded import strategies
from suite import results
from tests.conftest import load_bench, run_suite, shown, tables_of

pytestmark = pytest.mark.slow

SMALL = {"SHARDED_WIDTH": "16", "SHARDED_DEPTH": "2", "SHARDED_SEQ": "4", "SHARDED_BATCH": "4"}
DEPTH = int(SMALL["SHARDED_DEPTH"])
RUN = ("--experiments", "sharded", "--iters", "3", "--warmup", "1")


def _records(tmp_path, op: str = "train_step", oversubscribed: bool = False) -> dict[str, dict]:
    """strategy -> its record of ``op``: the step (train_step) or its communication replayed (comm_replay); of the
    main pass, or with ``oversubscribed`` of the pass the launcher ran with more ranks than cores."""
    recs = results.records(load_bench(tmp_path))
    return {r["strategy"]: r for r in recs if r["op"] == op and results.oversubscribed(r) == oversubscribed}


def _replays_right(steps: dict[str, dict], replays: dict[str, dict]) -> None:
    """Each collective strategy's replay issued its step's inventory, was checked, and split the step's time
    (a pipeline's traffic is point-to-point: it has no replay)."""
    assert set(replays) == {s for s in steps if not s.startswith("pp_")}
    for s, r in replays.items():
        step = steps[s]
        assert r["checked"] and r["n_wrong"] == 0, (s, r["n_wrong"])
        assert r["replayed"] == step["inventory"] and r["replay_bytes"] == step["inventory_bytes"], s
        assert r["step_s"] == pytest.approx(step["p50_us"] / 1e6, rel=1e-6), s  # the step case's own median
        assert r["compute_s"] == step["compute_s"] > 0 and r["comm_replay_s"] > 0, s
        assert r["exposed_comm_s"] == pytest.approx(max(r["step_s"] - r["compute_s"], 0.0)), s
        assert r["hidden_comm_s"] == pytest.approx(max(r["comm_replay_s"] - r["exposed_comm_s"], 0.0)), s
        assert r.get("time_includes") is None and r["busbw_gbps"] is None, s  # communication only, mixed ops


def _count(rec: dict, **match) -> int:
    return sum(r["count"] for r in rec["inventory"] if all(r[k] == v for k, v in match.items()))


def _inventory_as_structure_predicts(recs: dict[str, dict], world: int) -> None:
    """Counts from the depth alone (each block a unit of FSDP2 and a TP/SP pair; the head the root)."""
    if "ddp" in recs:
        ddp = recs["ddp"]
        assert _count(ddp, op="all_reduce", group="dp", phase="backward") >= 1
        assert sum(r["count"] * r["bytes"] for r in ddp["inventory"]) == 4 * ddp["n_params"]  # the gradient
    for s, regather in (("fsdp2", DEPTH), ("fsdp2_keep", 0), ("fsdp2_bf16", DEPTH)):
        if s in recs:
            r = recs[s]
            assert _count(r, op="all_gather", phase="forward", group="dp") == DEPTH + 1
            assert _count(r, op="all_gather", phase="backward", group="dp") == regather
            assert _count(r, op="reduce_scatter", phase="backward", group="dp", dtype="float32") == DEPTH + 1
            assert {x["dtype"] for x in r["inventory"] if x["op"] == "all_gather"} == (
                {"bfloat16"} if s == "fsdp2_bf16" else {"float32"}
            )
    if "tp" in recs:
        tp = recs["tp"]
        act = 4 * tp["batch"] * tp["seq"] * tp["width"]  # one float32 activation: every rank the whole batch
        assert recs["tp"]["inventory"] == [
            {"op": "all_reduce", "dtype": "float32", "bytes": act, "group": "tp", "phase": p, "count": DEPTH}
            for p in ("backward", "forward")
        ]
    if "sp" in recs:
        sp = recs["sp"]
        assert _count(sp, op="all_gather", phase="forward") == DEPTH + 1
        assert _count(sp, op="reduce_scatter") == 2 * DEPTH
        assert _count(sp, op="all_reduce", phase="optimizer") == 2 * DEPTH
    if "2d" in recs:
        r = recs["2d"]
        assert _count(r, op="all_reduce", group="tp") == 2 * DEPTH
        assert _count(r, op="all_gather", group="dp") == 2 * DEPTH + 1
        assert _count(r, op="reduce_scatter", group="dp") == DEPTH + 1


def _all_right(recs: dict[str, dict]) -> None:
    for s, r in recs.items():
        assert r["checked"] and r["n_wrong"] == 0, (s, r["n_wrong"], r.get("check_max_abs_diff"))
        assert r["inventory_matches_theory"], (s, r["inventory"], r["theory"])
        if s.startswith("pp_"):  # p2p: CommDebugMode sees none (tests/dist/test_sharded_pipeline_dist.py)
            assert r["p2p_ops_dispatched"] == r["p2p_ops_scheduled"] == 2 * r["inventory_ops"], s
        else:
            assert r["commdebug_ops"] == r["inventory_ops"] == sum(x["count"] for x in r["inventory"]), s
            assert sum(r["c10d_ops"].values()) == r["inventory_ops"], (s, r["c10d_ops"])  # c10d saw them all
        assert r["inventory_bytes"] == r["theory_bytes"] == r["size_bytes"], s
        assert r["time_includes"] and r["busbw_gbps"] is None, s
        assert r["check_max_abs_diff"] <= r["check_tol"], s


def fits(world: int) -> set[str]:
    """The registered strategies whose mesh fits ``world`` ranks: what the default run takes there."""
    return {n for n, st in strategies.STRATEGIES.items() if not st.mesh_cannot(world)}


def test_every_strategy_at_2_ranks_trains_like_one_process_and_moves_what_theory_says(tmp_path):
    # -W error: a UserWarning on any rank fails its case. Torch's warnings about CommDebugMode's hooks in the
    # inventory's step are filtered there, and said once under the table with the check that shows them harmless.
    proc = run_suite(tmp_path, *RUN, "--", "-W", "error::UserWarning", nproc=2, env=SMALL, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "warnings summary" not in proc.stdout and "Warning:" not in proc.stdout + proc.stderr
    main_pass = tables_of(proc).split("\n# second pass")[0]  # the 2-D mesh's tables follow, headed
    said = [ln for ln in main_pass.splitlines() if ln.startswith("# filtered in the inventory's step")]
    assert len(said) == 1 and said[0].endswith("match theory's (=)"), said
    recs = _records(tmp_path)
    pipelines = {"pp_gpipe", "pp_1f1b", "pp_interleaved"}
    # every registered strategy that fits 2 ranks (a new one too), among them those this test names below
    assert set(recs) == fits(2) >= {"ddp", "fsdp2", "fsdp2_keep", "fsdp2_bf16", "tp", "sp"} | pipelines
    assert "2d needs an even world of at least 4 ranks" in shown(proc)  # skipped with its reason
    over = _records(tmp_path, oversubscribed=True)  # then run at 4 ranks on 2 cores, for its check
    assert set(over) == fits(4) - fits(2) >= {"2d"} and {r["world_size"] for r in over.values()} == {4}
    _all_right(over)
    # 4 interleaved stages need 4 layers: that case alone takes 3 blocks, and says why
    assert {s: recs[s]["depth"] for s in recs} == {s: 3 if s == "pp_interleaved" else DEPTH for s in recs}
    assert recs["pp_interleaved"]["depth_raised_from"] == DEPTH and "depth_raised_from" not in recs["pp_gpipe"]
    _all_right(recs)
    _inventory_as_structure_predicts(recs, 2)
    _replays_right(recs, _records(tmp_path, "comm_replay"))
    for s in ("ddp", "fsdp2", "fsdp2_keep", "fsdp2_bf16", *pipelines):  # two (or 4 micro-batch) terms
        assert recs[s]["check_rule"] == "exact" and recs[s]["check_max_abs_diff"] == 0.0, s
    for s in ("tp", "sp"):
        assert recs[s]["check_rule"].startswith("tol per parameter"), s
    assert recs["fsdp2_keep"]["bus_vs_ddp"] == pytest.approx(1.0)
    assert recs["fsdp2"]["bus_bytes_gloo"] > recs["fsdp2"]["bus_bytes"]  # Gloo's reduce_scatter is an all_reduce


def test_2d_mesh_and_fsdp2_at_4_ranks(tmp_path):
    env = dict(SMALL, SHARDED_BATCH="8", SHARDED_STRATEGIES="2d,fsdp2,tp")
    proc = run_suite(tmp_path, *RUN, nproc=4, env=env, timeout=500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = _records(tmp_path)
    assert set(recs) == {"2d", "fsdp2", "tp"}
    _all_right(recs)
    _inventory_as_structure_predicts(recs, 4)
    _replays_right(recs, _records(tmp_path, "comm_replay"))  # 2d: on its dp and tp groups of 2
    assert recs["2d"]["mesh"] == "2x2 (dp,tp)"
    assert all(r["check_rule"].startswith("tol per parameter") for r in recs.values())  # four terms: order


def test_a_planted_wrong_sharding_fails_the_check_and_exits_6(tmp_path):
    env = dict(SMALL, SHARDED_STRATEGIES="fsdp2,fsdp2_scaled,tp_wrong_shard")
    proc = run_suite(tmp_path, *RUN, nproc=2, env=env, timeout=400)
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]  # EXIT_WRONG_RESULT
    recs = _records(tmp_path)
    assert recs["fsdp2"]["n_wrong"] == 0
    for s in ("fsdp2_scaled", "tp_wrong_shard"):
        # most elements on both ranks, after the check step and after the timed steps
        assert recs[s]["n_wrong"] > recs[s]["n_params"], (s, recs[s]["n_wrong"])
        assert recs[s]["check_max_abs_diff"] > 100 * recs[s]["check_tol"], s
    assert "produced wrong elements" in proc.stderr and "fsdp2_scaled" in proc.stderr


def test_compute_alone_is_below_the_step_and_a_misrouted_replay_exits_6(tmp_path):
    """DDP on a model wide enough that its all_reduce (4.4 MB) outweighs the arithmetic of a tiny batch: the
    step without communication is faster than the step. Each replay is misrouted after its check run (the
    suite's misroute fault): ddp's one all_reduce turns by a chunk; tp's two identical all_reduces of a phase
    trade places, which passed while every replayed call carried the same values."""
    env = dict(SMALL, SHARDED_WIDTH="256", SHARDED_STRATEGIES="ddp,tp")
    env |= {"SUITE_INJECT_CORRUPTION": "misroute:replay-ddp,replay-tp", "SUITE_REPORT": "1"}  # report: figure
    # medians of 9 steps: with 3, one rank descheduled by a busy machine in two compute samples can make the
    # compute alone slower than the step (a soak of 20 under extra load failed once, likely so)
    proc = run_suite(
        tmp_path, "--experiments", "sharded", "--iters", "9", "--warmup", "1", nproc=2, env=env, timeout=400
    )
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]  # EXIT_WRONG_RESULT
    for s in ("ddp", "tp"):
        step, replay = _records(tmp_path)[s], _records(tmp_path, "comm_replay")[s]
        assert replay["n_wrong"] > 0 and step["n_wrong"] == 0, s  # the replay's own check caught it
        assert f"replay-{s}" in proc.stderr, s
    assert "produced wrong elements" in proc.stderr
    step = _records(tmp_path)["ddp"]
    assert 0 < step["compute_s"] < step["p50_us"] / 1e6, (step["compute_s"], step["p50_us"])
    assert (tmp_path / "results" / "run" / "report" / "sharded-gloo-cpu-2.png").read_bytes().startswith(b"\x89PNG")


def test_a_replay_selected_alone_takes_its_own_inventory_and_step(tmp_path):
    """Without its strategy's case in the session (pytest -k), the replay inventories one step and times
    the step itself: the same collectives as theory's, checked, and a decomposition of a measured step."""
    from experiments.sharded import inventory

    env = dict(SMALL, SHARDED_STRATEGIES="tp")
    proc = run_suite(tmp_path, *RUN, "--", "-k", "replay", nproc=2, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _records(tmp_path) == {}
    r = _records(tmp_path, "comm_replay")["tp"]
    assert r["checked"] and r["n_wrong"] == 0
    w, d, q, b = (int(SMALL[k]) for k in ("SHARDED_WIDTH", "SHARDED_DEPTH", "SHARDED_SEQ", "SHARDED_BATCH"))
    assert inventory.matches(r["replayed"], inventory.theory("tp", w, d, q, b, 2))
    assert r["step_s"] > 0 and r["compute_s"] > 0 and r["comm_replay_s"] > 0
    assert r["step_compute_s"] == pytest.approx(max(r["step_s"] - r["comm_replay_s"], 0.0))  # what the model prices


@pytest.mark.parametrize(
    "env, words",
    [
        ({"SHARDED_STRATEGIES": "fsdp3"}, "SHARDED_STRATEGIES"),
        ({"SHARDED_WIDTH": "0"}, "SHARDED_WIDTH"),
        ({"SHARDED_DEPTH": "two"}, "SHARDED_DEPTH"),
    ],
)
def test_a_bad_knob_exits_2_before_any_rank_starts(tmp_path, env, words):
    proc = run_suite(tmp_path, *RUN, nproc=2, env=env, timeout=120)
    assert proc.returncode == 2 and words in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.strip().count("\n") == 0, proc.stderr  # one line
    assert not (tmp_path / "results" / "run" / "bench.json").exists()


def test_an_op_the_inventory_cannot_see_fails_the_case(tmp_path):
    """A ddp step that ends with a barrier, a tp and a GPipe step that also all-reduce from a helper thread
    (tests/plants/sharded_inventory.py): neither CommDebugMode nor the pipeline's P2PInventory sees them, c10d's
    sequence numbers do, and each case fails naming the group and both counts."""
    env = dict(SMALL, SHARDED_STRATEGIES="ddp,tp,pp_gpipe")
    proc = run_suite(tmp_path, *RUN, "--", "-p", "tests.plants.sharded_inventory", nproc=2, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]  # a case errored: its inventory cannot be recorded as measured
    assert "ddp: the step issued collectives its inventory did not see (dp: c10d issued 2, the inventory saw 1)" in out
    assert "tp: the step issued collectives its inventory did not see (tp: c10d issued 5, the inventory saw 4)" in out
    # rank 0 of GPipe at 2 ranks: 4 micro-batches' activations sent, their gradients received
    pp = "pp_gpipe: the step issued collectives its inventory did not see (pp: c10d issued 9, the inventory saw 8)"
    assert pp in out
    assert _records(tmp_path) == {}  # neither step is recorded as if its inventory were whole
    # the launcher's last word names the first failed case and why, not only "rank 0 exited with status 1"
    # (and both: tp's failure is stored by the run's last write, which no rank's exit cuts short)
    assert "# 3 case(s) failed: experiments/sharded/cases.py::test_sharded[ddp]: ddp: the step issued" in proc.stderr
