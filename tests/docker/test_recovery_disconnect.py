"""The recovery experiment's ``disconnect`` fault on docker (experiments/recovery/disconnect.py): a container
labelled as node1 of a compose project, on a network of its own, leaves the network for the seeded stretch and
joins it again under its service name. A few seconds (one small container, no run of the suite)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import ROOT

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
