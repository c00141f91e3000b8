"""docker/await-host.sh: a node waits for node 0's name (compose's node.sh and the Kubernetes pods)."""

import subprocess

from tests.conftest import ROOT


def test_await_host_runs_the_command_once_the_name_resolves():
    out = subprocess.run(
        ["docker/await-host.sh", "localhost", "5", "echo", "started"], cwd=ROOT, capture_output=True, text=True
    )
    assert (out.returncode, out.stdout) == (0, "started\n")


def test_await_host_gives_up_naming_the_host():
    out = subprocess.run(
        ["docker/await-host.sh", "node0.invalid", "0", "echo", "started"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout) == (3, "")
    assert out.stderr == "MASTER_ADDR node0.invalid did not resolve within 0 s (node 0's name)\n"
