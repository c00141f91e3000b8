"""`make predict` on a real stored run with the sharded experiment: a step per strategy at N ranks, each
number's model named in predict.json, and the reason where a strategy cannot run at N."""

from __future__ import annotations

import json
import shutil

from tests.conftest import ROOT
from tests.helpers.make_predict import make_predict

FIXTURE = ROOT / "tests" / "fixtures" / "sharded-gloo-2"


def _predicted_at_4(fixture, tmp_path) -> tuple:
    """A copy of ``fixture`` predicted at 4 ranks on 2 nodes: (the run, its "sharded step" lines, predict.json)."""
    run = tmp_path / "run"
    shutil.copytree(fixture, run)
    r = make_predict(f"RUN={run}", "RANKS=4", "RANKS_PER_NODE=2")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("sharded step")]
    return run, lines, json.loads((run / "predict.json").read_text())


def test_make_predict_on_a_real_run_with_sharded(tmp_path):
    """The fixture (a real 2-rank run, tests/fixtures/README.md) predicted at 4 ranks on 2 nodes: a step per
    strategy with its models named in predict.json; at 3 ranks the reasons."""
    run, lines, doc = _predicted_at_4(FIXTURE, tmp_path)
    for s, mesh in (("ddp", "4 (dp)"), ("fsdp2", "4 (dp)"), ("tp", "4 (tp)")):
        assert any(ln.startswith(f"sharded step ({s}, mesh {mesh}): compute ") for ln in lines), lines
    assert any("(pp_gpipe): not predicted: pipelines are point-to-point" in ln for ln in lines), lines
    assert {d["strategy"] for d in doc["sharded"]} == {"ddp", "fsdp2", "tp"}
    for d in doc["sharded"]:
        assert d["step_us"] > 0 and d["measured_ranks"] == 2 and d["compute_model"] and d["comm_model"]
        assert all(f"sharded.{k}" in doc["provenance"] for k in ("step_us", "compute_us", "comm_us", "hidden_us"))
    r = make_predict(f"RUN={run}", "RANKS=3", "RANKS_PER_NODE=1")
    assert r.returncode == 0 and "sharded step (tp): not predicted at 3 ranks: SHARDED_WIDTH=32" in r.stdout


USER = ROOT / "tests" / "fixtures" / "sharded-user-gloo-2"
MODEL = "examples.sharded_model:build"


def test_make_predict_prices_a_user_models_measured_inventory(tmp_path):
    """A real 2-rank run of your own model (the fixture: examples.sharded_model:build, tests/fixtures/README.md):
    its ddp, fsdp2 and tp steps at 4 ranks on 2 nodes priced from the collectives each record measured, the
    model named; at 3 ranks its 8 rows (ddp, fsdp2) and its 64 hidden features (tp) do not split."""
    run, lines, doc = _predicted_at_4(USER, tmp_path)
    for s, mesh in (("ddp", "4 (dp)"), ("fsdp2", "4 (dp)"), ("tp", "4 (tp)")):
        want = f"sharded step ({s} of {MODEL}, mesh {mesh}): compute "
        assert any(ln.startswith(want) for ln in lines), lines
    assert {d["strategy"] for d in doc["sharded"]} == {"ddp", "fsdp2", "tp"}
    for d in doc["sharded"]:
        assert d["model"] == MODEL and d["comm_model"].startswith("the collectives the step record measured")
        assert d["comm_us"] > 0 and d["step_us"] > d["compute_us"] > 0 and d["measured_ranks"] == 2
    r = make_predict(f"RUN={run}", "RANKS=3", "RANKS_PER_NODE=1")
    assert r.returncode == 0, r.stderr
    for s, why in (("fsdp2", "the model's batch has 8 rows"), ("tp", "tp_plan shards layers.0.inp (colwise")):
        assert f"sharded step ({s} of {MODEL}): not predicted at 3 ranks: {s}: {why}" in r.stdout, r.stdout
