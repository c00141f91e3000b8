"""The recovery experiment's wall-clock faults, host side (experiments/recovery/wall.py), on real processes: a
stand-in for torchrun's agent starts two ranks (``RANK`` and ``TORCHELASTIC_RESTART_COUNT`` in their
environment, as torchrun sets them) and, when one dies, stops the other and starts both again, for 2 s. A
fault on a rank that had restored strikes a step; one that falls while its group is going down or starting
again strikes the restart. No torch: about a second."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from experiments.recovery import wall
from experiments.recovery.plan import Fault

pytestmark = pytest.mark.slow

AGENT = """
import os, subprocess, time
for attempt in range(2):
    env = lambda r: {**os.environ, "RANK": str(r), "TORCHELASTIC_RESTART_COUNT": str(attempt)}
    ranks = [subprocess.Popen(["sleep", ("20", "2")[attempt]], env=env(r)) for r in range(2)]
    while all(p.poll() is None for p in ranks):
        time.sleep(0.01)
    time.sleep(0.2)  # tearing the group down
    for p in ranks:
        p.kill()
        p.wait()
"""


def test_a_fault_strikes_a_step_then_a_restart_of_the_agents_ranks(tmp_path):
    (tmp_path / "events").mkdir()
    agent = subprocess.Popen([sys.executable, "-c", AGENT])
    done = threading.Event()
    try:
        while len(wall.workers(agent.pid)) < 2:
            time.sleep(0.01)
        restored = {"rank": 1, "attempt": 0, "kind": "restore", "t": time.time(), "step": 4}
        (tmp_path / "events" / "rank1.jsonl").write_text(json.dumps(restored) + "\n")
        faults = (Fault(kind="kill", rank=1, step=0, at_s=0.001), Fault(kind="kill", rank=0, step=0, at_s=0.002))
        striker = threading.Thread(target=wall.strike_all, args=(faults, agent.pid, tmp_path, time.time(), done))
        striker.start()
        assert agent.wait(timeout=30) == 0  # its second attempt's ranks end by themselves
        done.set()
        striker.join()
    finally:
        done.set()
        agent.kill()
    events = [json.loads(line) for line in (tmp_path / "events" / "host.jsonl").read_text().splitlines()]
    assert [(e["rank"], e["struck"], e["kind"], e["at_s"]) for e in events] == [
        (1, "step", "fault", 0.001),
        (0, "restart", "fault", 0.002),
    ]
    assert events[0]["attempt"] == 0 and events[0]["step"] == 4 and events[0]["t"] <= events[1]["t"]
