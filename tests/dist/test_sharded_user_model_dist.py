"""Your own model in the sharded experiment (SHARDED_MODEL, examples/sharded_model.py) through the launcher users
run, at 2 Gloo ranks: FSDP2 and TP train what one process trains, their collectives are inventoried, theory
says "not modelled"; the same model with a wrong tp_plan (a row-parallel output left Partial) exits 6."""

import pytest

from examples import sharded_model
from tests.conftest import load_bench, run_suite

pytestmark = pytest.mark.slow

RUN = ("--experiments", "sharded", "--iters", "3", "--warmup", "1")
MODEL = "examples.sharded_model:build"


def _records(tmp_path) -> dict[str, dict]:
    return {b["extra_info"]["strategy"]: b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]}


def _count(rec: dict, **match) -> int:
    return sum(r["count"] for r in rec["inventory"] if all(r[k] == v for k, v in match.items()))


def test_the_example_trains_like_one_process_under_fsdp2_and_tp(tmp_path):
    env = {"SHARDED_MODEL": MODEL, "SHARDED_STRATEGIES": "fsdp2,tp"}
    proc = run_suite(tmp_path, *RUN, nproc=2, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = _records(tmp_path)
    assert set(recs) == {"fsdp2", "tp"}  # no replay: the decomposition is the built-in model's
    n_params = sum(p.numel() for p in sharded_model.Regressor().parameters())
    layers = sharded_model.LAYERS
    for s, r in recs.items():
        assert r["checked"] and r["n_wrong"] == 0, (s, r["n_wrong"], r.get("check_max_abs_diff"))
        assert r["model"] == MODEL and r["n_params"] == n_params and r["check_steps"] > 1, s
        assert r["theory"] is None and r["inventory_matches_theory"] is None and "not modelled" in r["theory_note"]
    fsdp2, tp = recs["fsdp2"], recs["tp"]
    assert fsdp2["check_rule"] == "exact" and fsdp2["mesh"] == "2 (dp)"
    # one FSDP2 unit per layer (the root holds no parameters of its own): gathered in forward and again in
    # backward, its float32 gradient reduce-scattered; together they carry every parameter
    assert _count(fsdp2, op="all_gather", phase="forward", group="dp") == layers
    assert _count(fsdp2, op="all_gather", phase="backward", group="dp") == layers
    assert _count(fsdp2, op="reduce_scatter", phase="backward", group="dp") == layers
    scattered = sum(r["count"] * r["bytes"] for r in fsdp2["inventory"] if r["op"] == "reduce_scatter")
    assert scattered == 4 * n_params
    assert fsdp2["bus_vs_ddp"] == pytest.approx(1.5)
    # TP: the row-parallel output all-reduced in forward per layer, one activation of the whole batch
    act = 4 * sharded_model.ROWS * sharded_model.WIDTH
    assert _count(tp, op="all_reduce", phase="forward", group="tp", bytes=act) == layers
    assert tp["check_rule"].startswith("tol per parameter") and tp["mesh"] == "2 (tp)"
    assert "theory: not modelled" in proc.stdout


def test_a_wrong_tp_plan_fails_the_check_and_exits_6(tmp_path):
    env = {"SHARDED_MODEL": "examples.sharded_model:build_unreduced", "SHARDED_STRATEGIES": "tp"}
    proc = run_suite(tmp_path, *RUN, nproc=2, env=env, timeout=300)
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]  # EXIT_WRONG_RESULT
    tp = _records(tmp_path)["tp"]
    assert tp["n_wrong"] > 0 and tp["check_max_abs_diff"] > 100 * tp["check_tol"], tp["n_wrong"]
    assert "produced wrong elements" in proc.stderr and "test_sharded[tp]" in proc.stderr
