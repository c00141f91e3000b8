"""Docker from the docker tier's tests: the engine, the image (built once a session: tests/docker/conftest.py's
``image`` fixture), a container of it, and what a compose run printed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
import pytest
from tests.conftest import ROOT


def run_docker(*args: str, timeout: float = 60, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def run_container(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`docker run --rm` that never outlives the test (a timeout removes the container too)."""
    name = f"suitetest-{uuid.uuid4().hex[:8]}"
    try:
        return run_docker("run", "--rm", "--name", name, *args, timeout=timeout)
    finally:
        run_docker("rm", "-f", name)


def engine_reason() -> str | None:
    if not shutil.which("docker"):
        return "no docker CLI on this host (.ci/setup.d/10-docker.sh installs the engine)"
    try:
        r = run_docker("info", "--format", "{{.ServerVersion}}", timeout=30)
    except subprocess.TimeoutExpired:
        return "the Docker engine did not answer within 30 s"
    if r.returncode != 0:
        return f"no Docker engine reachable: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}"
    if not (shutil.which("docker-compose") or run_docker("compose", "version").returncode == 0):
        return "neither `docker compose` nor docker-compose is installed"
    return None


def make_image(*args: str, timeout: float) -> subprocess.CompletedProcess:
    """`make -s image ARGS...` once the engine is reachable (skip, or fail under REQUIRE_DOCKER=1, when not);
    asserts it built and prints how long it took."""
    reason = engine_reason()
    if reason:
        if os.environ.get("REQUIRE_DOCKER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    t0 = time.monotonic()
    r = subprocess.run(
        ["make", "-s", "image", *args, f"PIP_PYTHON={sys.executable}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, f"make image {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    print(f"make image {' '.join(args)}: {time.monotonic() - t0:.0f} s")
    return r


def output_of(p) -> str:
    return (p.stdout or "") + (p.stderr or "")


IMAGE = os.environ.get("IMAGE", "torch-comm-suite:latest")


class Sim:
    """One compose project: a unique name, its own results directory, cleanup checks."""

    def __init__(self, tmp_path: Path, image: str):
        self.project = f"suitetest{uuid.uuid4().hex[:8]}"
        self.results = tmp_path / "results"
        self.results.mkdir()
        self.image = image
        self.run_id = "run"

    def env(self, **knobs: str) -> dict:
        e = dict(os.environ)
        for k in ("NNODES", "NPROC_PER_NODE", "LINK_RATE", "LINK_DELAY", "K", "PYTEST_ARGS", "RUN_ID"):
            e.pop(k, None)
        e.update(
            {
                "COMPOSE_PROJECT_NAME": self.project,
                "RESULTS_DIR": str(self.results),
                "RUN_ID": self.run_id,
                "IMAGE": self.image,
                "COMPOSE_TIMEOUT_S": "300",
                "SUITE_REPORT": "0",  # node 0's HTML report costs seconds a run; no test here reads it
            }
        )
        e.update(knobs)
        return e

    def run(self, timeout: float = 400, **knobs: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(ROOT / "docker" / "compose-run.sh")],
            cwd=ROOT,
            env=self.env(**knobs),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, log: Path, **knobs: str) -> subprocess.Popen:
        fh = open(log, "w")
        return subprocess.Popen(
            [str(ROOT / "docker" / "compose-run.sh")],
            cwd=ROOT,
            env=self.env(**knobs),
            stdout=fh,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def bench(self) -> dict:
        return json.loads((self.results / self.run_id / "bench.json").read_text())

    def containers(self, service: str | None = None, all_states: bool = True) -> list[str]:
        args = ["ps", "-q", "--filter", f"label=com.docker.compose.project={self.project}"]
        if service:
            args += ["--filter", f"label=com.docker.compose.service={service}"]
        if all_states:
            args.append("-a")
        return run_docker(*args).stdout.split()

    def assert_clean(self) -> None:
        assert self.containers() == [], f"containers of {self.project} left behind"
        nets = run_docker("network", "ls", "-q", "--filter", f"label=com.docker.compose.project={self.project}")
        assert nets.stdout.split() == [], f"network of {self.project} left behind"
        vols = run_docker("volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={self.project}")
        assert vols.stdout.split() == [], f"volume of {self.project} (the job's ssh keys) left behind"

    def cleanup(self) -> None:
        ids = self.containers()
        if ids:
            run_docker("rm", "-f", *ids)
        nets = run_docker("network", "ls", "-q", "--filter", f"label=com.docker.compose.project={self.project}")
        for n in nets.stdout.split():
            run_docker("network", "rm", n)
        vols = run_docker("volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={self.project}")
        for v in vols.stdout.split():
            run_docker("volume", "rm", "-f", v)
