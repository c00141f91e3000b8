"""The container files agree with each other (no Docker needed, but for the compose CLI's own check)."""

import os
import re
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import ROOT, load_script


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
        n = name[len("node") :]
        normal = body.replace(f"hostname: node{n}", "hostname: nodeN").replace(f'NODE_RANK: "{n}"', 'NODE_RANK: "N"')
        assert normal == blocks[0][1].replace("hostname: node0", "hostname: nodeN").replace(
            'NODE_RANK: "0"', 'NODE_RANK: "N"'
        )


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


# --- docker-compose.gpu.yml against docker-compose.yml -------------------------------------------


def _compose(name: str) -> dict:
    """A compose file as compose reads it (anchors and `<<` merge keys resolved)."""
    return yaml.safe_load((ROOT / name).read_text())


def _default(value: str) -> str:
    """The default of a `${VAR:-default}` value (the value itself when it is a literal)."""
    m = re.fullmatch(r"\$\{\w+:-([^}]*)\}", str(value))
    return m.group(1) if m else str(value)


BASE, GPU = _compose("docker-compose.yml"), _compose("docker-compose.gpu.yml")
DEVICE_KEYS = {"driver", "count", "device_ids", "capabilities", "options"}


def test_gpu_override_has_the_same_services_and_version():
    assert list(GPU["services"]) == list(BASE["services"])
    assert GPU["version"] == BASE["version"]
    assert set(GPU) <= {"version", "services"} | {k for k in GPU if k.startswith("x-")}, (
        "the override adds no networks or volumes of its own"
    )


@pytest.mark.parametrize("service", list(GPU["services"]))
def test_gpu_reservation_is_well_formed(service):
    """Each node reserves NVIDIA GPUs the way the compose spec and the NVIDIA toolkit expect: a
    driver, the gpu capability, and either a count ("all" or >= 1) or device ids, not both."""
    svc = GPU["services"][service]
    devices = svc["deploy"]["resources"]["reservations"]["devices"]
    assert isinstance(devices, list) and devices
    for d in devices:
        assert set(d) <= DEVICE_KEYS, f"unknown keys {set(d) - DEVICE_KEYS}"
        assert d["driver"] == "nvidia"
        assert isinstance(d["capabilities"], list) and "gpu" in d["capabilities"]
        assert ("count" in d) != ("device_ids" in d), "count or device_ids, exactly one"
        if "count" in d:
            assert d["count"] == "all" or (isinstance(d["count"], int) and d["count"] >= 1), d["count"]
        else:
            assert d["device_ids"] and all(isinstance(i, str) for i in d["device_ids"])
    assert svc["ipc"] == "host" and svc["ulimits"]["memlock"] == -1


def test_gpu_nodes_run_nccl_on_disjoint_gpus_one_per_rank():
    """The default GPU lists give every rank of the default layout its own GPU, and no GPU to two
    nodes; the nodes keep their rank and hostname from the base file (the override has neither)."""
    nproc = int(_default(BASE["x-node"]["environment"]["NPROC_PER_NODE"]))
    seen: set[str] = set()
    for name, svc in GPU["services"].items():
        env = svc["environment"]
        assert _default(env["BACKEND"]) == "nccl" and env["DEVICE"] == "cuda"
        assert "NODE_RANK" not in env and "hostname" not in svc
        gpus = _default(env["CUDA_VISIBLE_DEVICES"]).split(",")
        assert len(gpus) == nproc and all(g.isdigit() for g in gpus), (name, gpus)
        assert not seen & set(gpus), f"{name} shares GPUs {seen & set(gpus)}"
        seen |= set(gpus)
        assert name in BASE["services"] and BASE["services"][name]["environment"]["NODE_RANK"] == name[len("node") :]


@pytest.mark.docker
def test_compose_cli_accepts_both_files():
    """The compose tool's own schema check of the merged files (it catches misspelled keys)."""
    cli = ["docker-compose"] if shutil.which("docker-compose") else ["docker", "compose"]
    if not shutil.which(cli[0]):
        if os.environ.get("REQUIRE_DOCKER") == "1":
            pytest.fail("no compose CLI (.ci/setup.d/10-docker.sh installs docker-compose)")
        pytest.skip("no compose CLI")
    r = subprocess.run(
        [*cli, "-f", "docker-compose.yml", "-f", "docker-compose.gpu.yml", "config", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [*cli, "-f", "docker-compose.yml", "-f", "docker-compose.gpu.yml", "config", "--services"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and sorted(r.stdout.split()) == sorted(BASE["services"]), r.stdout + r.stderr


# --- every knob reaches the nodes ------------------------------------------------------------------

NOT_FOR_COMPOSE = load_script("knob_files").NOT_PASSED


def test_every_knob_reaches_the_compose_nodes():
    """A knob set on `make compose-up` must arrive in every node's environment (compose passes only the
    variables its file names), else the nodes silently run with the default (DDP_PARAMS once did)."""
    from suite.common import knobs, switches

    env = set(BASE["services"]["node0"]["environment"])
    wanted = {k.make for k in knobs.KNOBS} | {e.env for e in knobs.ENV_KNOBS} | {"SUITE_PROGRESS", "SUITE_PROGRESS_S"}
    unknown = sorted(v for v in env if v.startswith("SUITE_") and v not in switches.SWITCHES and v not in wanted)
    assert not unknown, f"docker-compose.yml passes {unknown}, which are neither switches (SWITCHES) nor knobs"
    missing = sorted(wanted - env - set(NOT_FOR_COMPOSE))
    assert not missing, f"docker-compose.yml does not pass {missing} to the nodes"
    for svc in BASE["services"].values():
        assert set(svc["environment"]) == set(BASE["services"]["node0"]["environment"]) | {"NODE_RANK"}


def test_every_run_wide_knob_is_a_node_flag():
    """docker/node.sh turns each run-wide knob into the launcher's flag (knobs.KNOBS: the one spelling)."""
    from suite.common import knobs

    text = (ROOT / "docker" / "node.sh").read_text()
    pairs = set(re.findall(r"([a-z-]+):([A-Z_]+)", text)) | set(re.findall(r'--([a-z-]+) "\$\{([A-Z_]+)', text))
    missing = sorted(f"{k.flag}:{k.make}" for k in knobs.KNOBS if (k.flag, k.make) not in pairs)
    assert not missing, f"docker/node.sh does not pass {missing}"
