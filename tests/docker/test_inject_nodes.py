"""The node classes of the fail-slow injector (suite/inject/classes/egress.py, nodecpu.py) on a container of the
suite's image, as the host's controller applies them to a compose node mid-run: the node's egress shaping changed
and put back as it was (none, or the run's own rate), its CPU quota cut and given back."""

from __future__ import annotations

import uuid

import pytest

from suite.inject.classes import egress, nodecpu
from suite.inject.kind import Node
from tests.helpers.docker import run_docker


@pytest.fixture
def node(image):
    name = f"suitetest-{uuid.uuid4().hex[:8]}"
    args = ("run", "-d", "--rm", "--name", name, "--cap-add", "NET_ADMIN", "--user", "root", "--entrypoint", "sleep")
    cid = run_docker(*args, image, "300", check=True).stdout.strip()
    yield Node("node1", cid)
    run_docker("rm", "-f", name)


def _qdisc(node: Node) -> str:
    return run_docker("exec", node.container, "tc", "qdisc", "show", "dev", "eth0", check=True).stdout.strip()


@pytest.mark.parametrize("own_rate", [None, "200mbit"])
def test_the_egress_cut_changes_the_nodes_shaping_and_puts_it_back(node, own_rate):
    if own_rate:  # as docker/link.sh shapes a node given LINK_RATE
        shape = ("tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", *egress.tbf(own_rate, "25000b"))
        run_docker("exec", node.container, *shape, check=True)
    before = _qdisc(node)
    cut = egress.Rate(node, 20)
    assert "tbf" in _qdisc(node) and "rate 20Mbit" in _qdisc(node)
    cut.stop()
    assert _qdisc(node) == before


def test_the_node_cpu_cut_sets_the_containers_quota_and_gives_it_back(node):
    def cpus() -> int:
        return int(run_docker("inspect", "-f", "{{.HostConfig.NanoCpus}}", node.container, check=True).stdout)

    assert cpus() == 0
    cut = nodecpu.Cpus(node, 0.3)
    assert cpus() == 300_000_000
    cut.stop()
    assert cpus() == cut.before * 1e9 > 0  # all of the host's: docker cannot unset --cpus
