"""suite/launch/world.py: the ranks a run starts where NPROC is not given, and the line that says why."""

from __future__ import annotations

import pytest

from suite.launch import cli, world


def _chosen(monkeypatch, usable, argv=(), env=None, experiments=("collectives",)):
    monkeypatch.setattr(world, "usable_here", lambda: usable)
    a, _ = cli.parse_args(list(argv))
    line = world.choose_nproc(a, list(experiments), env or {})
    return a.nproc, line


@pytest.mark.parametrize("argv", [(), ("--nproc", "auto")])
def test_no_nproc_starts_one_rank_per_usable_core(monkeypatch, argv):
    assert _chosen(monkeypatch, 2, argv) == ("2", "world: 2 ranks (one per usable core of 2; NPROC=n sets it)")
    assert _chosen(monkeypatch, 3, argv)[0] == "3"
    assert _chosen(monkeypatch, 64, argv)[0] == "4"


def test_one_core_gets_the_smallest_world_that_runs_marked_oversubscribed(monkeypatch):
    nproc, line = _chosen(monkeypatch, 1, experiments=("collectives", "doctor"))
    assert nproc == "2" and "oversubscribed" in line


def test_an_nproc_given_is_kept(monkeypatch):
    assert _chosen(monkeypatch, 2, ("--nproc", "4")) == ("4", None)
    assert _chosen(monkeypatch, 2, env={"NPROC_PER_NODE": "3"}) == (None, None)  # layout reads it
    assert _chosen(monkeypatch, 2, env={"NPROC_PER_NODE": "auto"})[0] == "2"


def test_a_multi_node_run_keeps_its_default_of_4_a_node(monkeypatch):
    nproc, line = _chosen(monkeypatch, 2, ("--nnodes", "2"))
    assert nproc == "4" and "multi-node" in line
