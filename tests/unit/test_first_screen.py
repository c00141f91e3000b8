"""The first screen's numbers that do not add up (suite/report/add_up.py), on records shaped as the experiments
store them: each is said with its cause where the run recorded one (its ranks against its cores, pinning that put
several ranks on a core), else "not explained"; numbers that add up say nothing."""

from __future__ import annotations

import copy

from suite.report import add_up
from suite.report.first_screen import first_screen
from suite.report.headline import headline_items


def add_up_rows(run: dict) -> list[tuple[str, str]]:
    """The rows of ``run``'s headlines, as the first screen gets them."""
    return add_up.add_up_rows(run, headline_items(run))


def _run(recs: list[dict], ranks: int = 2) -> dict:
    """A stored run of ``recs`` on one 2-core host with ``ranks`` ranks, no other load."""
    host = {"cpu_count": 2, "affinity_cpus": 2, "ranks": list(range(ranks)), "load_avg_start": [0.5] * 3}
    return {
        "benchmarks": [{"extra_info": {"world_size": ranks, "backend": "gloo", "device": "cpu", **r}} for r in recs],
        "machine_info": {"suite": {"hostnames": ["vm"] * ranks, "hosts": {"vm": host}}},
        "suite": {"complete": True, "exit_status": 0, "config": {}},
    }


DDP = {
    "experiment": "ddp",
    "op": "ddp_step",
    "label": "ddp",
    "model": "mlp",
    "n_params": 48982,
    "grad_bytes": 195928,
    "time_us": 84_700.0,
    "local_step_ms": 21.0,
    "allreduce_ms": 23.3,
}
PIPE = {
    "experiment": "model_parallel",
    "op": "pipeline_overlap",
    "table": "pipeline",
    "stages": 2,
    "microbatches": 8,
    "schedule": "overlap",
    "time_us": 5750.0,
    "bubble": 0.47,
    "model_bubble": 0.15,
    "ideal_bubble": 1 / 9,
}
PIN = {"experiment": "placement", "op": "all_reduce", "table": "affinity", "size_bytes": 1024, "cpus_available": 2}


def test_ddp_time_beyond_its_compute_that_exceeds_its_all_reduce_is_said_with_waits_for_a_core():
    (row,) = add_up_rows(_run([DDP], ranks=4))
    assert row[0] == "does not add up"
    assert row[1].startswith("ddp: the step takes 63.7 ms beyond its compute, more than its whole 23.3 ms gradient")
    assert "40.4 ms is neither; likely cause: this run's 4 ranks share 2 usable cores (CPU oversubscribed)" in row[1]
    # the same run with its ranks on their own cores and no other load: nothing measured explains it
    (row,) = add_up_rows(_run([DDP], ranks=2))
    assert row[1].endswith("not explained (ranks fit their cores, no other load seen)")
    # a step whose time beyond its compute is within its all_reduce adds up
    assert add_up_rows(_run([{**DDP, "time_us": 40_000.0}])) == []


def test_a_pipeline_idle_beyond_its_model_and_pinning_that_slows_are_said_with_their_cause():
    rows = [
        t
        for _, t in add_up_rows(
            _run(
                [
                    PIPE,
                    {**PIN, "pinning": "unpinned", "time_us": 100.0},
                    {**PIN, "pinning": "pinned", "time_us": 256.0, "ranks_per_core": 2},
                ],
                ranks=4,
            )
        )
    ]
    assert rows[0].startswith("model_parallel: the pipeline idles 47% where its model (each stage's compute")
    assert "says 15% and the ideal is 11%; likely cause: this run's 4 ranks share 2 usable cores" in rows[0]
    assert rows[1] == (
        "placement: pinned ranks take 2.56x the unpinned time; cause: pinning put 2 ranks on each core (the record's "
        "ranks_per_core), where unpinned they could spread over 2 CPUs"
    )
    calm = copy.deepcopy(PIPE) | {"bubble": 0.16}
    assert (
        add_up_rows(
            _run(
                [
                    calm,
                    {**PIN, "pinning": "unpinned", "time_us": 100.0},
                    {**PIN, "pinning": "pinned", "time_us": 110.0, "ranks_per_core": 1},
                ]
            )
        )
        == []
    )


def test_sharded_steps_beside_ddps_name_the_models_and_the_first_screen_carries_every_row():
    sharded = {"experiment": "sharded", "op": "train_step", "strategy": "fsdp", "n_params": 17888}
    sharded |= {"time_us": 2650.0, "size_bytes": 71552}
    run = _run([DDP, sharded], ranks=4)
    rows = [t for _, t in add_up_rows(run)]
    assert rows[-1] == (
        "ddp and sharded train models of different sizes (ddp's mlp 48982 parameters, sharded's 17888 "
        "parameters): their step times are not comparable"
    )
    screen = first_screen(run, headline_items(run))
    assert [t for k, t in screen.warnings if k == "does not add up"] == rows
    assert [k for k, _ in screen.warnings][0] == "CPU oversubscribed"


def test_the_unstable_share_leaves_out_the_oversubscribed_pass():
    """The oversubscribed pass's times measure CPU contention (suite.results.oversubscribed): a wide interval
    there says nothing of the run's communication, so the first screen's unstable share does not count it."""
    steady = {"experiment": "collectives", "op": "all_reduce", "label": "ar", "size_bytes": 1024, "time_us": 10.0}
    steady["samples_us"] = [10.0 + 0.01 * k for k in range(20)]
    crowded = {**steady, "label": "ar-over", "oversubscribed": True, "world_size": 4}
    crowded["samples_us"] = [10.0 * (1 + k % 5) for k in range(20)]  # ±100%: unstable, were it counted
    run = _run([steady, crowded])
    screen = first_screen(run, headline_items(run))
    assert not [w for w in screen.warnings if w[0] == "unstable"], screen.warnings
    run = _run([steady, {**crowded, "oversubscribed": False}])  # the same times on a pass of its own: counted
    screen = first_screen(run, headline_items(run))
    assert [w[1] for w in screen.warnings if w[0] == "unstable"][0].startswith("1 of 2 cases")


HALTING = {"driver": "haltpoll", "guest_halt_poll_ns": 0, "states": [{"name": "POLL", "disabled_cpus": []}]}
HALTING["states"].append({"name": "haltpoll idle", "latency_us": 1, "disabled_cpus": []})


def test_a_host_whose_idle_vcpus_halt_at_once_is_a_warning_and_a_polling_one_is_not():
    run = _run([DDP])
    run["machine_info"]["suite"]["hosts"]["vm"]["cpuidle"] = HALTING
    screen = first_screen(run, headline_items(run))
    rows = [t for k, t in screen.warnings if k == "CPUs halt when idle"]
    assert len(rows) == 1 and "wake-up through the hypervisor" in rows[0] and "(host" not in rows[0]
    run["machine_info"]["suite"]["hosts"]["vm"]["cpuidle"] = {**HALTING, "guest_halt_poll_ns": 200000}
    assert not [k for k, _ in first_screen(run, headline_items(run)).warnings if k == "CPUs halt when idle"]
    del run["machine_info"]["suite"]["hosts"]["vm"]["cpuidle"]  # a run stored before hosts recorded it
    assert not [k for k, _ in first_screen(run, headline_items(run)).warnings if k == "CPUs halt when idle"]
    two = _run([DDP])
    two["machine_info"]["suite"]["hosts"] = {"a": {**two["machine_info"]["suite"]["hosts"]["vm"], "cpuidle": HALTING}}
    two["machine_info"]["suite"]["hosts"]["b"] = {"cpu_count": 2, "ranks": [1]}
    assert [t for k, t in first_screen(two, headline_items(two)).warnings if k == "CPUs halt when idle"][0].endswith(
        "(host a)"
    )
