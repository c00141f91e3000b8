"""The node classes of the injector (egress, nodecpu): taken in the compose simulation only, left by a node's own
controller to the host's (suite/inject/host.py), which refuses bad input in one line and leaves the other classes
to the nodes; and where egress puts its rate (pure logic; tests/docker/test_inject_nodes.py runs them on a
container)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from suite.errors import ConfigError
from suite.inject import controller, plan, stint, truth
from suite.inject.classes import egress
from tests.conftest import ROOT


@pytest.mark.parametrize("name, severity", [("egress", 20), ("nodecpu", 0.5)])
def test_a_node_class_is_refused_in_a_local_run_and_taken_in_the_compose_simulation(name, severity):
    env = {"INJECT": f"{name}:2:5:{severity}", "SEED": "0"}
    with pytest.raises(ConfigError, match=f"{name} acts on a node of the compose simulation"):
        plan.from_env(env, 4)
    assert plan.from_env({**env, plan.COMPOSE_FLAG: "1"}, 4).cls == name
    assert all(plan.parse("random", s, 4, compose=True).cls not in ("egress", "nodecpu") for s in range(40))


def _host(env: dict, tmp_path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "suite.inject.host", str(tmp_path), "proj", "2", "2"]
    e = {k: v for k, v in os.environ.items() if k not in ("INJECT", "SEED", "INJECT_RUN_S")} | env
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, env=e)


@pytest.mark.parametrize(
    "env, rc, says",
    [
        ({"INJECT": "egress:4"}, 2, "error: INJECT=egress:4: target rank '4' does not exist (the run has ranks 0-3)\n"),
        ({"INJECT": "egress:1:5:0"}, 2, "error: INJECT=egress:1:5:0: severity 0 of egress is out of range"),
        ({"INJECT": "pause:1:5:1"}, 0, ""),  # a class of ranks: the nodes' own controllers act
        ({}, 0, ""),
    ],
)
def test_the_hosts_controller_refuses_bad_input_and_leaves_rank_classes_to_the_nodes(tmp_path, env, rc, says):
    proc = _host(env, tmp_path)
    assert (proc.returncode, proc.stdout) == (rc, "") and proc.stderr.startswith(says)
    assert proc.stderr.count("\n") == (1 if says else 0) and not (tmp_path / truth.FOLDER).exists()


def test_a_nodes_own_controller_leaves_a_node_class_to_the_host(tmp_path):
    found = plan.parse("egress:1:0:20", 0, 2, compose=True)
    truth.write(tmp_path, {"plan": found.as_dict(), "host": "node0", "world_size": 2})
    run = controller.Run(tmp_path, os.getpid())
    run.run()
    assert json.loads(truth.path(tmp_path).read_text())["here"] is False and run.effect is None


NETEM = "qdisc netem 1: root refcnt 2 limit 1000 delay 1ms\n"


@pytest.mark.parametrize(
    "shown, where, rate",
    [
        ("qdisc noqueue 0: root refcnt 2\n", ["root", "handle", "1:"], None),
        (
            "qdisc tbf 1: root refcnt 3 rate 200Mbit burst 25000b lat 50ms\n",
            ["root", "handle", "1:"],
            ("200Mbit", "25000b"),
        ),
        (
            NETEM + "qdisc tbf 10: parent 1:1 rate 50Mbit burst 4Kb lat 50ms",
            ["parent", "1:1", "handle", "10:"],
            ("50Mbit", "4Kb"),
        ),
    ],
)
def test_the_egress_cut_goes_where_the_links_rate_is_and_keeps_that_rate(shown, where, rate):
    before = egress.TBF.search(shown)
    assert egress.where(shown) == where and (before.groups() if before else None) == rate
    assert egress.burst_bytes(20) == 4096 and egress.burst_bytes(1000) == 62500


class _Effect:
    how = "a test's effect"

    def __init__(self) -> None:
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


class _Stint(stint.Stint):
    host = "test-host"

    def __init__(self, run_dir, lives: int) -> None:
        super().__init__(run_dir, {"plan": "p"})
        self.lives = lives

    def alive(self) -> bool:
        self.lives -= 1
        return self.lives >= 0


def test_a_stint_applies_its_effect_at_the_onset_and_reverts_it_once_even_when_the_run_ends_first(tmp_path):
    done = _Stint(tmp_path, lives=10**6)  # the stretch runs out: reverted after it
    effect = _Effect()
    done.apply(0.0, 0.0, 0.0, lambda: effect, container="c1")
    kept = json.loads(truth.path(tmp_path, "test-host").read_text())
    assert effect.stopped == 1 and kept["how"] == "a test's effect" and kept["container"] == "c1"
    assert kept["here"] and kept["applied_unix"] <= kept["reverted_unix"]
    done.revert()  # a second revert (the controller's finally) does nothing
    assert effect.stopped == 1

    # a node's class whose call takes seconds (docker update under load): the onset is when it said it began
    slow = _Stint(tmp_path / "slow", lives=10**6)

    def start_slowly():
        e = _Effect()
        e.began_unix = time.time()
        time.sleep(0.3)
        return e

    slow.apply(0.0, 0.0, 0.0, start_slowly)
    kept = json.loads(truth.path(tmp_path / "slow", "test-host").read_text())
    assert kept["apply_s"] >= 0.3 and kept["reverted_unix"] - kept["applied_unix"] >= 0.3

    ended = _Stint(tmp_path / "ended", lives=0)  # the run ends before the onset: nothing applied
    ended.apply(time.time(), 3600.0, None, lambda: pytest.fail("applied after the run ended"))
    assert "applied" not in json.loads(truth.path(tmp_path / "ended", "test-host").read_text())
