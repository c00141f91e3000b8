"""The cpu injection class (suite/inject/classes/cpu.py): a rank's CPU cut by a CFS quota on a cgroup of its own
where one is writable, else its threads pinned to fewer cores; both undone on ``stop``, and the controller writes
which it used to the truth."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from suite.inject import launcher, truth
from suite.inject.classes import cpu
from tests.helpers.inject import FAKE_TORCHRUN, end_fake_launch
from tests.helpers.inject import until as _until

THREADED = """
import threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
print("ready", flush=True)
time.sleep(120)
"""
"""A process of 4 threads, as a rank holds several (Gloo's, the intra-op pool's)."""


QUOTA_V1 = "cpu.cfs_quota_us"


@pytest.fixture
def threaded():
    proc = subprocess.Popen([sys.executable, "-c", THREADED], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


def _affinities(pid: int) -> list[set[int]]:
    return [os.sched_getaffinity(int(t)) for t in os.listdir(f"/proc/{pid}/task")]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning to fewer cores needs two")
def test_pinning_puts_every_thread_on_the_lowest_core_and_gives_their_cores_back(threaded):
    cores = frozenset(os.sched_getaffinity(0))
    pinned = cpu.Pinned(threaded.pid, cores, 0)  # under one CPU: one core
    assert _affinities(threaded.pid) == [{min(cores)}] * 4 and pinned.how == "affinity"
    pinned.stop()
    assert _affinities(threaded.pid) == [set(cores)] * 4


def _cgroup_lines(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text()


CHILD = (
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
    "print('ready', flush=True); time.sleep(120)"
)


def test_a_quota_moves_back_a_child_the_rank_started_under_it():
    """A rank may start a process while its CPU is cut: the child inherits the cgroup, and goes back with it."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; exec(sys.stdin.readline())"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        try:
            quota = cpu.Quota(proc.pid, 0.5)
        except ValueError:
            pytest.skip("no writable cpu cgroup on this host")
        proc.stdin.write(CHILD + "\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "ready"
        child = psutil.Process(proc.pid).children()[0]
        assert f"suite-inject-{proc.pid}" in _cgroup_lines(child.pid)
        quota.stop()
        assert not quota.mine.exists() and f"suite-inject-{proc.pid}" not in _cgroup_lines(child.pid)
    finally:
        for p in psutil.Process(proc.pid).children():
            p.kill()
        proc.kill()
        proc.wait()


def test_a_quota_moves_the_process_into_a_cgroup_of_its_own_and_back(threaded):
    before = _cgroup_lines(threaded.pid)
    try:
        quota = cpu.Quota(threaded.pid, 0.25)
    except ValueError:
        pytest.skip("no writable cpu cgroup on this host")
    name = f"suite-inject-{threaded.pid}"
    assert name in _cgroup_lines(threaded.pid) and quota.how == "cgroup"
    held = {p.name: p.read_text().split() for p in quota.mine.glob("cpu.*") if p.name in ("cpu.max", QUOTA_V1)}
    assert held in ({"cpu.max": ["25000", "100000"]}, {QUOTA_V1: ["25000"]})
    quota.stop()
    assert _cgroup_lines(threaded.pid) == before and not quota.mine.exists()


def test_the_controller_cuts_the_targets_cpu_says_how_and_undoes_it(tmp_path):
    env = {"INJECT": "cpu:1:0:0.5:rest", "SEED": "0", "INJECT_RUN_S": "60"}
    ctl = launcher.begin(env, tmp_path, 2)
    fake = subprocess.Popen([sys.executable, "-c", FAKE_TORCHRUN], stdin=subprocess.DEVNULL)
    try:
        _until(lambda: len(psutil.Process(fake.pid).children()) == 2, "started")
        rank1 = next(p for p in psutil.Process(fake.pid).children() if p.environ().get("RANK") == "1")
        before = (_cgroup_lines(rank1.pid), rank1.cpu_affinity())
        (tmp_path / "hang").mkdir()
        (tmp_path / "hang" / "rank1.ring").write_bytes(b"")
        ctl.poll(fake.pid)
        _until(lambda: truth.read(tmp_path)[0].get("applied"), "applied")
        how = truth.read(tmp_path)[0]["how"]
        assert how in ("cgroup", "affinity")
        if how == "cgroup":
            assert f"suite-inject-{rank1.pid}" in _cgroup_lines(rank1.pid)
        ctl.end()
        assert "reverted_unix" in truth.read(tmp_path)[0]
        assert (_cgroup_lines(rank1.pid), rank1.cpu_affinity()) == before
    finally:
        end_fake_launch(fake, ctl)
