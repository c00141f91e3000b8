"""The recovery experiment's ``disconnect`` fault on docker (experiments/recovery/disconnect.py): a container
labelled as node1 of a compose project, on a network of its own, leaves the network for the seeded stretch and
joins it again under its service name (a few seconds: one small container, no run of the suite); and a compose run
whose elastic job spans two nodes survives node1 disconnected, recovering bitwise (about 50-130 s)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from suite import results
from tests.conftest import ROOT
from tests.helpers.docker import output_of

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60, check=True).stdout.strip()


def _networks(cid: str) -> dict:
    return json.loads(_docker("inspect", "-f", "{{json .NetworkSettings.Networks}}", cid))


def test_a_node_leaves_the_network_for_its_stretch_and_rejoins_under_its_name(tmp_path, image):
    project = f"recovery-disconnect-{uuid.uuid4().hex[:8]}"
    net = f"{project}_simnet"
    _docker("network", "create", net)
    labels = ["--label", f"com.docker.compose.project={project}", "--label", "com.docker.compose.service=node1"]
    try:
        cid = _docker("run", "-d", "--rm", "--network", net, *labels, "--entrypoint", "sleep", image, "120")
        out = tmp_path / "truth.json"
        cmd = [sys.executable, "-m", "experiments.recovery.disconnect", project, "2", "disconnect:1@0.2s"]
        fault = subprocess.Popen([*cmd, "--timeout-s", "2", "--seed", "3", "--out", str(out)], cwd=ROOT)
        seen_off = False
        while fault.poll() is None:
            seen_off = seen_off or net not in _networks(cid)
            time.sleep(0.1)
        assert fault.returncode == 0
        truth = json.loads(out.read_text())
        assert truth["struck"] and truth["node"] == 1 and truth["network"] == net and 3.0 <= truth["stretch_s"] <= 6
        assert truth["t_reconnect"] - truth["t_disconnect"] >= truth["stretch_s"]
        assert seen_off  # off the network during the stretch (3 s or more, polled every 0.1 s)
        assert "node1" in _networks(cid)[net]["Aliases"]  # back, under the name its peers resolve
    finally:
        subprocess.run(["docker", "rm", "-f", *([cid] if "cid" in locals() else [])], capture_output=True)
        subprocess.run(["docker", "network", "rm", net], capture_output=True)


def test_a_job_across_two_nodes_survives_node1_disconnected_and_recovers_bitwise(sim):
    """One torchrun agent a node at node 0's c10d rendezvous, checkpoints in the results volume; node1 leaves the
    network 2 s after the job's first step, training, for 3-6 s, past the job's 2 s collective timeout."""
    p = sim.run(
        timeout=400,
        NNODES="2",
        NPROC_PER_NODE="1",
        EXPERIMENTS="recovery",
        RECOVERY_STRATEGIES="elastic",
        RECOVERY_FAULTS="disconnect:1@2s",
        RECOVERY_STEPS="2000",
        RECOVERY_CKPT_EVERY="400",
        RECOVERY_TIMEOUT_S="2",
    )
    assert p.returncode == 0, output_of(p)[-4000:]
    (rec,) = results.records(results.load_run(sim.results / sim.run_id))
    assert rec["job_nodes"] == 2 and rec["fault"] == "disconnect:1@2s"
    assert rec["exact"] is True and rec["n_wrong"] == 0 and rec["wrong"] == ""
    (f,) = rec["per_fault"]
    assert (f["fault"], f["node"], f["at_s"], f["struck"]) == ("disconnect", 1, 2.0, "step")
    assert 3.0 <= f["stretch_s"] <= 6.0 and f["detect_s"] is not None and f["recover_s"] > f["detect_s"]
    assert rec["t_detect"] == f["detect_s"] and rec["t_recover"] == f["recover_s"]
    (job,) = (sim.results / sim.run_id / "recovery").glob("run-*")
    truth = json.loads((job / "truth" / "disconnect0.json").read_text())
    assert truth["struck"] and truth["t_reconnect"] - truth["t_disconnect"] >= truth["stretch_s"]
    assert (job / "torchrun.node1.log").is_file()  # node1's own agent ran the job's other half
    hosts = {json.loads(line)["host"] for r in (0, 1) for line in (job / "events" / f"rank{r}.jsonl").open()}
    assert hosts == {"node0", "node1"}
    sim.assert_clean()
