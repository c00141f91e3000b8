"""No rank leaves before rank 0 has written the run (suite.harness.dist.EndOfRun), against a real
TCPStore in this process standing in for the launcher's. The whole path -- every rank exits 1, rank 0
planted to end 3 s after the others, nothing lost -- is tests/dist/test_collectives_dist.py's
test_corrupted_output_is_counted_and_fails."""

from __future__ import annotations

import datetime
import socket
import threading
import time

import pytest
import torch.distributed as dist

from suite.harness.dist import EndOfRun


@pytest.fixture
def env():
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=datetime.timedelta(seconds=10))
    yield {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master.port)}
    del master


def test_a_rank_waits_until_rank_0_is_done(env):
    rank0, rank1 = EndOfRun(0, "run", env), EndOfRun(1, "run", env)
    got = []
    t = threading.Thread(target=lambda: got.append(rank1.wait(grace_s=5, wait_s=5)))
    t.start()
    time.sleep(0.3)
    assert rank0.ending() and t.is_alive()  # ending is not done: rank 0 still writes
    time.sleep(0.3)
    assert t.is_alive()
    assert rank0.done()
    t.join(timeout=5)
    assert got == [True]


def test_a_rank_0_that_never_ends_its_cases_is_left_after_the_grace(env):
    t0 = time.monotonic()
    assert EndOfRun(1, "run", env).wait(grace_s=0.3, wait_s=60) is False
    assert time.monotonic() - t0 < 5


def test_a_rank_0_that_ends_but_never_finishes_is_left_after_the_wait(env):
    EndOfRun(0, "run", env).ending()
    assert EndOfRun(1, "run", env).wait(grace_s=5, wait_s=0.3) is False


def test_another_run_on_the_same_store_is_not_heard(env):
    rank0 = EndOfRun(0, "old", env)
    rank0.ending(), rank0.done()
    assert EndOfRun(1, "new", env).wait(grace_s=0.3, wait_s=0.3) is False


def test_rank_0_and_a_lone_process_never_wait(env):
    assert EndOfRun(0, "run", env).wait() is False
    t0 = time.monotonic()
    assert EndOfRun(1, "run", {"WORLD_SIZE": "1"}).wait() is False
    assert EndOfRun(0, "run", {}).done() is False
    assert time.monotonic() - t0 < 1


def test_a_store_that_is_gone_ends_the_wait():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    t0 = time.monotonic()
    assert EndOfRun(1, "run", env, connect_s=0.2).wait(grace_s=60, wait_s=60) is False
    assert EndOfRun(0, "run", env, connect_s=0.2).ending() is False
    assert time.monotonic() - t0 < 30
