"""A step's compute where ranks outnumber cores (suite/model/contention.py): which ranks share which cores in a
stored run (the compose simulation's containers of one machine, an oversubscribed host), and the compute priced
from the probe at N there, the extrapolation elsewhere (the validation through `python -m suite.model validate`:
tests/unit/test_predict.py)."""

from __future__ import annotations

import pytest

from suite.model import contention


def _run(ranks_per_host: list[int], usable: float | None) -> dict:
    """A stored run's machine_info: hosts node0.. with these ranks each, each seeing ``usable`` cores."""
    names = [f"node{i}" for i, k in enumerate(ranks_per_host) for _ in range(k)]
    hosts = {
        f"node{i}": {"cpu_share": {"ranks": k, "usable_cpus": usable, "oversubscribed": None}}
        for i, k in enumerate(ranks_per_host)
    }
    return {"machine_info": {"suite": {"hostnames": names, "hosts": hosts}}}


def test_the_compose_simulations_ranks_share_one_machines_cores():
    compose = _run([1, 1, 1, 1], 2)  # 4 containers, one rank each, each seeing the machine's 2 cores
    assert contention.run_cores(compose, one_machine=True) == (4, 2)
    assert contention.outnumbered(contention.run_cores(compose, one_machine=True))
    # read as separate machines, each rank has 2 cores to itself
    assert contention.run_cores(compose, one_machine=False) == (1, 2)
    assert not contention.outnumbered(contention.run_cores(compose, one_machine=False))


def test_an_oversubscribed_host_outnumbers_its_cores_on_its_own():
    assert contention.run_cores(_run([4], 2), one_machine=False) == (4, 2)
    assert contention.run_cores(_run([2, 3], 2), one_machine=False) == (3, 2)  # the worst host
    assert not contention.outnumbered(contention.run_cores(_run([2, 2], 2), one_machine=False))


def test_unknown_cores_outnumber_nothing():
    assert contention.run_cores(_run([1, 1, 1], None), one_machine=True) == (3, None)
    assert contention.run_cores({"machine_info": {"suite": {"hostnames": ["a", "a"]}}}, one_machine=False) == (2, None)
    assert not contention.outnumbered((3, None)) and not contention.outnumbered((0, None))


def test_outnumbered_ranks_take_the_probe_and_say_so():
    us, how, probe = contention.priced(5000.0, "a + b/N on 2/3 ranks", 5, (5, 2), 30_000.0)
    assert (us, probe) == (30_000.0, 30_000.0)
    assert how == (
        "the probe at 5 ranks: the step's compute alone, measured on all 5 ranks at once (5 ranks share 2 cores)"
    )
    _, how, _ = contention.priced(5000.0, "a + b/N on 2/3 ranks", 5, (5, 2), 30_000.0, contention.IN_STEP)
    assert how.startswith("the probe at 5 ranks: the step minus its collectives replayed alone (on CPU nothing")


def test_the_compute_in_the_step_is_its_time_less_its_replayed_collectives_never_below_zero():
    assert contention.in_step(111_000.0, 40_000.0) == 71_000.0
    assert contention.in_step(30_000.0, 31_000.0) == 0.0  # two medians: the replay may come out longer


@pytest.mark.parametrize("sharing", [(2, 2), (1, 2), (4, None)])
def test_ranks_with_cores_enough_keep_the_extrapolation(sharing):
    assert contention.priced(5000.0, "per-rank work from 2 ranks", 4, sharing, 30_000.0) == (
        5000.0,
        "per-rank work from 2 ranks",
        None,
    )


def test_outnumbered_ranks_without_a_probe_keep_the_extrapolation_and_name_what_it_leaves_out():
    us, how, probe = contention.priced(5000.0, "per-rank work from 2 ranks", 8, (8, 2), None)
    assert (us, probe) == (5000.0, None)
    assert how == (
        "per-rank work from 2 ranks; 8 ranks share 2 cores but no probe ran at 8 ranks: the contention is not priced"
    )
