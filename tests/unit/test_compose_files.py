"""The container files agree with each other (no Docker needed)."""

import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT


def _dockerfile_default(arg: str) -> str:
    m = re.search(rf"^ARG {arg}=(\S+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert m, f"Dockerfile has no default for {arg}"
    return m.group(1)


def test_compose_builds_from_the_dockerfile_default_base():
    compose = (ROOT / "docker-compose.yml").read_text()
    m = re.search(r"BASE_IMAGE: \$\{BASE_IMAGE:-([^}]+)\}", compose)
    assert m and m.group(1) == _dockerfile_default("BASE_IMAGE")


def test_node_services_differ_only_in_rank_and_hostname():
    text = (ROOT / "docker-compose.yml").read_text()
    blocks = re.findall(r"^  (node\d+):\n((?:    .*\n)+)", text, re.M)
    assert [b[0] for b in blocks] == ["node0", "node1", "node2"]
    for name, body in blocks:
        n = name[len("node"):]
        normal = body.replace(f"hostname: node{n}", "hostname: nodeN").replace(f'NODE_RANK: "{n}"', 'NODE_RANK: "N"')
        assert normal == blocks[0][1].replace("hostname: node0", "hostname: nodeN").replace('NODE_RANK: "0"',
                                                                                            'NODE_RANK: "N"')


def test_torch_pin_matches_the_base_image_tag():
    pin = re.search(r"^torch==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert _dockerfile_default("BASE_IMAGE").startswith(f"pytorch/pytorch:{pin}-cuda")


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "docker").glob("*.sh")))
def test_scripts_parse(script):
    shell = "bash" if (ROOT / "docker" / script).read_text().startswith("#!/usr/bin/env bash") else "sh"
    if not shutil.which(shell):
        pytest.skip(f"no {shell}")
    r = subprocess.run([shell, "-n", str(ROOT / "docker" / script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
