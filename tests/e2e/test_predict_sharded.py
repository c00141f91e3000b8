"""`make predict` on a real stored run with the sharded experiment: a step per strategy at N ranks, each
number's model named in predict.json, and the reason where a strategy cannot run at N."""

from __future__ import annotations

import json
import shutil

from tests.conftest import ROOT
from tests.unit.test_predict import _make

FIXTURE = ROOT / "tests" / "fixtures" / "sharded-gloo-2"


def test_make_predict_on_a_real_run_with_sharded(tmp_path):
    """The fixture (a real 2-rank run, tests/fixtures/README.md) predicted at 4 ranks on 2 nodes: a step per
    strategy with its models named in predict.json; at 3 ranks the reasons."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    r = _make(f"RUN={run}", "RANKS=4", "RANKS_PER_NODE=2")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("sharded step")]
    for s, mesh in (("ddp", "4 (dp)"), ("fsdp2", "4 (dp)"), ("tp", "4 (tp)")):
        assert any(ln.startswith(f"sharded step ({s}, mesh {mesh}): compute ") for ln in lines), lines
    assert any("(pp_gpipe): not predicted: pipelines are point-to-point" in ln for ln in lines), lines
    doc = json.loads((run / "predict.json").read_text())
    assert {d["strategy"] for d in doc["sharded"]} == {"ddp", "fsdp2", "tp"}
    for d in doc["sharded"]:
        assert d["step_us"] > 0 and d["measured_ranks"] == 2 and d["compute_model"] and d["comm_model"]
        assert all(f"sharded.{k}" in doc["provenance"] for k in ("step_us", "compute_us", "comm_us", "hidden_us"))
    r = _make(f"RUN={run}", "RANKS=3", "RANKS_PER_NODE=1")
    assert r.returncode == 0 and "sharded step (tp): not predicted at 3 ranks: SHARDED_WIDTH=32" in r.stdout
