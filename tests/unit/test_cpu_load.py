"""suite/system/cpu_load.py: ranks against cores, and what a load average says (pure functions)."""

from __future__ import annotations

import pytest

from suite.system import cpu_load


@pytest.mark.parametrize("cpus,text", [([0], "0"), ([0, 1, 2, 3], "0-3"), ([8, 0, 1, 3], "0-1,3,8"), ([], "")])
def test_cpu_lists_read_and_write_the_kernel_format(cpus, text):
    assert cpu_load.cpu_list(cpus) == text
    assert cpu_load.parse_cpu_list(text) == set(cpus)


def test_usable_cores_are_the_affinity_bounded_by_a_cgroup_quota():
    assert cpu_load.usable_cpus(4, None) == 4
    assert cpu_load.usable_cpus(4, 1.5) == 1.5
    assert cpu_load.usable_cpus(None, None) is None


@pytest.mark.parametrize(
    "ranks,threads,usable,over",
    [(4, 1, 2, "ranks"), (2, 1, 2, None), (2, 2, 2, "threads"), (2, None, 2, None), (3, 1, None, None)],
)
def test_a_host_is_oversubscribed_by_its_ranks_or_their_threads(ranks, threads, usable, over):
    share = cpu_load.cpu_share(ranks, threads, usable)
    assert share["oversubscribed"] == over
    assert (cpu_load.describe_share(share) is None) == (over is None)


def test_the_line_names_the_numbers_contention_distorts_and_the_fix():
    line = cpu_load.describe_share(cpu_load.cpu_share(4, 1, 2))
    assert line.startswith("4 ranks on 2 usable cores: ")
    for distorted in ("small-message latency", "bus bandwidth", "scaling efficiency", "compute/communication split"):
        assert distorted in line
    assert line.endswith("(NPROC=2 or fewer avoids it)")
    assert "OMP_NUM_THREADS=1" in cpu_load.describe_share(cpu_load.cpu_share(2, 4, 2))


def test_threads_follow_omp_num_threads():
    assert cpu_load.threads_from_env({"OMP_NUM_THREADS": "3"}) == 3
    assert cpu_load.threads_from_env({}) is None and cpu_load.threads_from_env({"OMP_NUM_THREADS": "x"}) is None


def test_a_load_is_named_only_beyond_the_host_cpus_and_what_the_run_adds():
    fits = cpu_load.cpu_share(2, 1, 2)
    assert "other processes competed" in cpu_load.load_contention(3.9, 2, fits)
    assert cpu_load.load_contention(1.9, 2, fits) is None  # within the cores
    assert cpu_load.load_contention(2.3, 2, fits) is None  # beyond them, but no more than this run's 2 ranks
    assert cpu_load.load_contention(None, 2, fits) is None
    over = cpu_load.cpu_share(4, 1, 2)
    assert cpu_load.load_contention(4.2, 2, over) == "this run's 4 ranks share 2 usable cores (CPU oversubscribed)"


def test_the_load_through_a_run_keeps_its_peak_and_its_end():
    t = cpu_load.track_load(None, [1.0, 0.5, 0.2])
    t = cpu_load.track_load(t, [3.0, 1.0, 0.4])
    t = cpu_load.track_load(t, None)  # no load average on this OS: nothing changes
    t = cpu_load.track_load(t, [2.0, 1.2, 0.5])
    assert t == {"peak_1min": 3.0, "end": [2.0, 1.2, 0.5], "samples": 3}
    assert cpu_load.peak_load([1.0, 1, 1], None, [2.5]) == 2.5 and cpu_load.peak_load(None) is None


@pytest.mark.parametrize(
    "usable,need,world",
    [(2, 2, 2), (3, 2, 3), (4, 2, 4), (16, 2, 4), (2.5, 2, 2), (1, 2, 2), (1.5, 2, 2), (8, 6, 6), (None, 2, 4)],
)
def test_the_default_world_is_one_rank_per_usable_core_from_2_to_4(usable, need, world):
    n, why = cpu_load.default_world(usable, need)
    assert n == world
    over = cpu_load.cpu_share(n, 1, usable)["oversubscribed"]
    assert ("oversubscribed" in why) == (over == "ranks"), why


def test_the_default_world_says_why():
    assert cpu_load.default_world(2)[1] == "one per usable core of 2"
    assert cpu_load.default_world(8)[1] == "one per usable core, at most 4, of 8"
    assert cpu_load.default_world(1)[1] == "oversubscribed: 1 usable core, and the experiments need at least 2 ranks"
