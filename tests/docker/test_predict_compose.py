"""`make validate-predict` at a reduced size on the compose simulation: fitted on 2 and 3 nodes, it
predicts the all_reduce of 4 nodes over a shaped link (LINK_RATE, so the network and not the two CPUs
bounds the bandwidth-bound sizes) and compares with what 4 nodes measure."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from tests.conftest import ROOT
from tests.helpers.docker import run_docker

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_validate_predict_all_reduce_ddp_and_fsdp2_steps_at_a_reduced_size(tmp_path, image):
    project = f"suitetest{uuid.uuid4().hex[:8]}"
    knobs = {
        "VALIDATE_FIT": "2 3",
        "VALIDATE_CHECK": "4",
        "VALIDATE_OPS": "all_reduce",
        "VALIDATE_MIN": "256K",
        "VALIDATE_MAX": "1M",
        "VALIDATE_ITERS": "5",
        "VALIDATE_RATE": "100mbit",
        "VALIDATE_ID": "v",
        "VALIDATE_DDP": "1",
        "VALIDATE_DDP_PARAMS": "100K",
        # the sharded steps' validation with one strategy (the default runs ddp, fsdp2 and tp: its numbers
        # come from the full command in docs/reports.md)
        "VALIDATE_SHARDED": "1",
        "VALIDATE_SHARDED_STRATEGIES": "fsdp2",
        "RESULTS": str(tmp_path),
        "IMAGE": image,
        "PIP_PYTHON": sys.executable,
    }
    env = {
        "COMPOSE_PROJECT_NAME": project,
        "COMPOSE_TIMEOUT_S": "300",
        "SUITE_REPORT": "0",  # each node-count run's own HTML report: seconds a run, and the test reads none of them
        "PATH": __import__("os").environ["PATH"],
        "HOME": __import__("os").environ.get("HOME", "/root"),
    }
    try:
        r = subprocess.run(
            ["make", "-s", "validate-predict", *(f"{k}={v}" for k, v in knobs.items())],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )
    finally:
        left = run_docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={project}").stdout.split()
        if left:
            run_docker("rm", "-f", *left)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert left == [], "containers of the validation runs left behind"
    assert "geomean |err|" in r.stdout and "all_reduce" in r.stdout
    v = json.loads((tmp_path / "v-1p.json").read_text())
    assert v["fit_ranks"] == [2, 3] and {row["ranks"] for row in v["rows"]} == {4}
    s = v["summary"]["all_reduce"]
    assert s["n_bandwidth_bound"] >= 2, r.stdout
    assert s["geomean_abs_error_bandwidth_bound"] < 0.15, r.stdout
    # the DDP step is checked the same way: predicted at 4 ranks from the 3-rank run's compute, buckets
    # and overlap, compared with the 4-rank measurement
    (ddp,) = v["ddp"]
    assert ddp["ranks"] == 4 and ddp["fit_ranks"] == 3 and ddp["model"] == "mlp", ddp
    assert ddp["predicted_us"] > 0 and ddp["measured_us"] > 0 and "ddp step (mlp) at 4 ranks" in r.stdout
    # and each sharded strategy's step: predicted at 4 ranks from the 2- and 3-rank runs' compute and the
    # link fits of the collectives its inventory lists, compared with the 4-rank measurement (no accuracy
    # asserted here: docs/reports.md has the table)
    (fsdp2,) = v["sharded"]
    assert fsdp2["strategy"] == "fsdp2" and fsdp2["ranks"] == 4 and fsdp2["fit_ranks"] == [2, 3], fsdp2
    assert fsdp2["predicted_us"] > 0 and fsdp2["measured_us"] > 0 and fsdp2["predicted_comm_us"] > 0, fsdp2
    # the 4 containers share this machine's cores: where they outnumber them, the compute is the 4-rank run's
    # probe (on CPU its step less its collectives replayed alone, all 4 ranks at once), else extrapolated from the
    # 2- and 3-rank runs
    hosts = json.loads((tmp_path / "v-4n1p" / "bench.json").read_text())["machine_info"]["suite"]["hosts"]
    if 4 > max(h["cpu_share"]["usable_cpus"] for h in hosts.values()):
        assert fsdp2["compute_us"] == fsdp2["compute_probe_us"] and "probe at 4 ranks" in fsdp2["compute_model"]
        assert "replayed alone" in fsdp2["compute_model"], fsdp2
    else:
        assert fsdp2["compute_probe_us"] is None and "probe" not in fsdp2["compute_model"], fsdp2
    assert v["sharded_summary"]["n"] == 1 and "sharded step" in r.stdout, r.stdout[-2000:]
    # the table names the algorithm Gloo runs and says how it was found
    assert (
        v["algorithms"]["all_reduce"]["algorithm"] == "ring"
        and "gloo/allreduce.cc" in v["algorithms"]["all_reduce"]["how"]
    )
