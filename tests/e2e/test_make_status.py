"""`scripts/make-status <target> [KNOB=value ...]`: make, exiting with the status of the recipe command that
failed (the compare gate's 1, the launcher's 3, ...) where make itself exits 2 for any failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.helpers.stored_runs import FIXTURE, stored_run, save_run, scaled_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """This interpreter's environment as make's VENV, marked installed (make never rebuilds it, also in a
    sub-make, which does not inherit ``-o``)."""
    d = tmp_path_factory.mktemp("venv")
    for entry in Path(sys.prefix).iterdir():
        if entry.name != ".installed":
            (d / entry.name).symlink_to(entry)
    (d / ".installed").touch()
    return d


def _make(tool: str, venv: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [str(ROOT / "scripts" / "make-status") if tool == "make-status" else "make"]
    return subprocess.run(
        [*cmd, "-s", "--no-print-directory", f"VENV={venv}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SUITE_REPORT": "0", **(env or {})},
    )


def test_make_status_keeps_the_status_that_make_turns_into_2(tmp_path, venv):
    slow = save_run(scaled_run(stored_run(), lambda n: np.full(n, 1.25)), tmp_path / "slow")
    compare = ("compare", f"BASE={FIXTURE}", f"NEW={slow}")
    assert _make("make", venv, *compare).returncode == 2
    r = _make("make-status", venv, *compare)
    assert r.returncode == 1 and "gate: FAIL" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]  # the gate's 1

    # the launcher's preflight (3), also through a target that runs make again (bench-ddp: make bench-cpu)
    bench = (f"RESULTS={tmp_path / 'results'}", "NPROC=2")
    no_interface = {"GLOO_SOCKET_IFNAME": "nosuchif0"}
    for target in ("bench-cpu", "bench-ddp"):
        r = _make("make-status", venv, target, *bench, env=no_interface)
        assert r.returncode == 3 and "nosuchif0" in r.stderr, (target, r.stderr[-2000:])
    # a K= that matches no case: the one line, before any rank (bad input, 2), as make's own usage errors
    r = _make("make-status", venv, "bench-cpu", *bench, "EXPERIMENTS=collectives", "K=nosuchcase")
    assert r.returncode == 2 and "error: the case selection (K= / -k 'nosuchcase') matches no case" in r.stderr
    assert "[rank" not in r.stderr and "torch.distributed" not in r.stderr, r.stderr[-2000:]
    assert _make("make-status", venv, "compare").returncode == 2
    r = _make("make-status", venv, "help")
    assert r.returncode == 0 and "scripts/make-status <target>" in r.stdout
