"""The null backend (suite/harness/null_backend.py): a one-rank process group whose ops complete at once, with a
one-rank group's results, counted as c10d counts ops; a group of more ranks is refused."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys

import pytest
import torch.distributed as dist

from suite.harness import null_backend
from tests.conftest import ROOT

# In a process of its own: the default group is one per process (this one may hold a Gloo group).
PROGRAM = """
import json, torch, torch.distributed as dist
from suite.harness import null_backend
null_backend.start()
x = torch.arange(4.0)
work = dist.all_reduce(x, async_op=True)
out = [torch.zeros(4)]
dist.all_gather(out, x)
flat = torch.zeros(4)
dist.all_gather_single(flat, x)
names = [None]
dist.all_gather_object(names, "here")
dist.broadcast(x, src=0)
dist.barrier()
print(json.dumps({
    "backend": dist.get_backend(), "done": work.is_completed() and work.wait(), "x": x.tolist(),
    "gathered": out[0].tolist(), "flat": flat.tolist(), "names": names,
    "seq": dist.group.WORLD._get_sequence_number_for_group(),
}))
dist.destroy_process_group()
"""


def test_a_null_group_completes_each_op_at_once_with_a_one_rank_groups_result():
    r = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["backend"] == "null" and got["done"] is True
    assert got["x"] == got["gathered"] == got["flat"] == [0.0, 1.0, 2.0, 3.0] and got["names"] == ["here"]
    assert got["seq"] >= 5  # every op counted as c10d counts them (the journal reads it)


def test_a_null_group_of_more_than_one_rank_is_refused():
    null_backend.register()
    with pytest.raises(ValueError, match="one rank"):
        null_backend.NullGroup(dist.HashStore(), 0, 2, datetime.timedelta(seconds=5))
