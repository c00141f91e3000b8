"""The recovery experiment's ``disconnect`` fault, host side (experiments/recovery/disconnect.py), pure logic and
bad input: the spelling, the seeded stretch past the collective timeout, a node beyond the cluster, a disconnect
outside compose; each one line and status 2 before docker is asked anything."""

from __future__ import annotations

import subprocess
import sys

import pytest

from experiments.recovery.disconnect import Disconnect, parse
from experiments.recovery.plan import PlanError
from tests.conftest import ROOT


def test_the_stretch_is_seeded_and_past_the_timeout():
    d = parse("disconnect:1@5s", nnodes=2, seed=7, timeout_s=4.0)
    assert d == parse("disconnect:1@5s", nnodes=2, seed=7, timeout_s=4.0)
    assert (d.node, d.at_s) == (1, 5.0) and 6.0 <= d.stretch_s <= 12.0
    assert d != parse("disconnect:1@5s", nnodes=2, seed=8, timeout_s=4.0)
    assert isinstance(parse("disconnect:0@0.5s", nnodes=1, seed=0, timeout_s=1), Disconnect)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("disconnect:1@5", "spell it disconnect:<node>@<seconds>s"),
        ("kill:1@5s", "spell it disconnect:<node>@<seconds>s"),
        ("disconnect:2@5s", "node 2 is beyond the compose cluster's 2 nodes (0..1)"),
    ],
)
def test_a_bad_disconnect_is_one_line(text, says):
    with pytest.raises(PlanError) as e:
        parse(text, nnodes=2, seed=0, timeout_s=3)
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["", "2", "disconnect:1@1s"], "error: a disconnect fault needs the compose cluster: no compose project given"),
        (["proj", "2", "disconnect:3@1s"], "error: fault 'disconnect:3@1s': node 3 is beyond the compose cluster's"),
    ],
)
def test_its_command_line_refuses_bad_input_with_status_2(args, says):
    cmd = [sys.executable, "-m", "experiments.recovery.disconnect", *args]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.startswith(says) and p.stderr.count("\n") == 1, p.stderr
