"""Adding a backend is adding one file: a copy of the repository's tracked files plus one record file in
suite/common/backends/ (Gloo registered with c10d under another name, through torch's
``Backend.register_backend``) runs through the launcher with 2 ranks, nothing else in the copy changed: it passes
preflight, BACKEND= takes its name, the collectives run on it and are checked, and the backends experiment times
it as a lane of its own beside Gloo's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import copy_tracked

pytestmark = pytest.mark.slow

NAME = "gloo_twin"
RECORD = f'''"""A throwaway backend: Gloo, registered with c10d under another name."""

from suite.common.backends.record import Backend


def available() -> bool:
    import torch.distributed as dist

    return dist.is_gloo_available()


def register() -> str:
    import torch.distributed as dist

    def create(store, rank, size, timeout):
        return dist.ProcessGroupGloo(store, rank, size, timeout)

    if not hasattr(dist.Backend, "{NAME.upper()}"):
        dist.Backend.register_backend("{NAME}", create, devices=["cpu"])
    return "{NAME}"


BACKEND = Backend(
    name="{NAME}", devices=("cpu",), available=available, version=available, c10d=f"{{__name__}}:register"
)
'''


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """The repository's tracked files and the one record file; nothing else."""
    dst = copy_tracked(tmp_path_factory.mktemp("checkout"))
    record = dst / "suite" / "common" / "backends" / f"{NAME}.py"
    assert not record.exists()
    record.write_text(RECORD)
    return dst


def _run(tree: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the copy's suite, not the checkout's
    env.update({"OMP_NUM_THREADS": "1", "SUITE_PROGRESS": "off", "SUITE_REPORT": "0"})
    return subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def run(tree) -> list[dict]:
    p = _run(
        tree,
        *("-m", "suite.launch", "--nproc", "2", "--backend", NAME, "--device", "cpu"),
        *("--experiments", "collectives,backends", "--max-bytes", "4K", "--iters", "3", "--warmup", "1"),
        *("--results-root", "results", "--run-id", "twin"),
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads((tree / "results" / "twin" / "bench.json").read_text())["benchmarks"]


def test_the_new_backend_is_a_choice_and_refused_where_it_cannot_run(tree):
    p = _run(tree, "-m", "suite.launch", "--help")
    assert f"auto | gloo | nccl | mpi | ucc | {NAME}" in " ".join(p.stdout.split()), p.stdout
    bad = _run(tree, "-m", "suite.launch", "--check", "--nproc", "2", "--backend", NAME, "--device", "cuda")
    assert bad.returncode == 2 and f"backend {NAME} needs DEVICE=cpu" in bad.stderr, bad.stderr


def test_the_collectives_run_and_are_checked_on_it(run):
    coll = [r["extra_info"] for r in run if r["extra_info"].get("experiment") == "collectives"]
    assert len(coll) > 20 and {r["backend"] for r in coll} == {NAME}
    ops = {r["op"] for r in coll if r.get("checked") is True and r.get("n_wrong") == 0}
    assert {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all"} <= ops, ops
    assert not [r for r in coll if r.get("n_wrong")]


def test_the_backends_experiment_times_it_beside_gloo(run):
    lanes = {r["extra_info"].get("lane") for r in run if r["extra_info"].get("experiment") == "backends"}
    assert {f"{NAME}/cpu", "gloo/cpu"} <= lanes, lanes
