"""The harness (suite/harness/runner.py) on real Gloo groups, through the launcher users run: timed
buffers are checked (one buffer set per in-flight op in pipelined mode), a rank that arrives late
at the op and one slow after it are both named, and a case with nothing to check says so."""

from __future__ import annotations

import pytest

from tests.conftest import TINY_SIZE, load_bench, run_suite

pytestmark = pytest.mark.slow

TINY = ["--experiments", "collectives", *TINY_SIZE, "--iters", "5", "--warmup", "1"]


def _launch(tmp_path, *args: str, nproc: int = 2, env: dict | None = None):
    """The collectives at one tiny size (1 warm-up, 5 timed calls), through the launcher users run."""
    return run_suite(tmp_path, *TINY, *args, nproc=nproc, env=env)


def _recs(tmp_path):
    return [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]


def test_pipelined_uses_one_buffer_set_per_op_and_checks_every_one(tmp_path):
    proc = _launch(
        tmp_path,
        "--timing",
        "pipelined",
        "--pipeline-depth",
        "4",
        "--",
        "-k",
        "all_reduce-sum or all_gather_into_tensor or barrier",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = _recs(tmp_path)
    data = [r for r in recs if r["op"] != "barrier"]
    assert data and all(r["buffer_sets"] == 4 and r["ops_per_sample"] == 4 for r in data)
    assert all(
        r["checked"] is True and r["n_wrong"] == 0 and r["n_wrong_timed"] == 0 and r["buffer_sets_checked"] == 4
        for r in data
    )


def test_a_corrupted_in_flight_buffer_fails_the_case(tmp_path):
    # The check run is clean; one element of the last in-flight buffer set is flipped after the
    # timed region: only a check of the timed buffers can see it.
    proc = _launch(
        tmp_path,
        "--timing",
        "pipelined",
        "--pipeline-depth",
        "4",
        "--",
        "-k",
        "all_reduce-sum or broadcast",
        env={"SUITE_INJECT_CORRUPTION": "all_reduce@timed"},
    )
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]  # EXIT_WRONG_RESULT
    recs = _recs(tmp_path)
    bad = [r for r in recs if r["variant"] == "all_reduce"]
    good = [r for r in recs if r["variant"] == "broadcast"]
    assert bad and all(r["n_wrong_check"] == 0 and r["n_wrong_timed"] >= 1 and r["n_wrong"] >= 1 for r in bad)
    assert good and all(r["n_wrong"] == 0 for r in good)


def _delayed_run(tmp_path, spec: str, *opts: str) -> list[dict]:
    """all_reduce and all_gather_into_tensor on 3 ranks with SUITE_INJECT_DELAY=spec: their records."""
    proc = _launch(
        tmp_path,
        *opts,
        "--",
        "-k",
        "all_reduce-sum or all_gather_into_tensor",
        nproc=3,
        env={"SUITE_INJECT_DELAY": spec},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = _recs(tmp_path)
    assert {r["variant"] for r in recs} == {"all_reduce", "all_gather_into_tensor"}
    return recs


@pytest.mark.parametrize("timing", ["blocking", "pipelined"])
def test_a_rank_that_arrives_late_is_named_the_late_arrival(tmp_path, timing):
    # Rank 1 sleeps 100 ms after each sample's barrier, before its op call (a slow rank): the others wait
    # for it inside the op, so every rank's time is >= 100 ms and the rank medians cannot tell who it
    # was; its arrival (barrier exit -> op call) names it in every iteration. Pipelined: before the
    # first of the sample's ops.
    for r in _delayed_run(tmp_path, "1:0.1@before", "--timing", timing, "--pipeline-depth", "2"):
        n, depth = r["iterations"], r["ops_per_sample"]
        assert depth == (2 if timing == "pipelined" else 1)
        assert r["late_arrival_rank"] == [1] * n, r["label"]
        assert r["late_arrival_rank_hist"] == [0, n, 0]
        assert min(r["late_arrival_by_us"]) >= 50_000  # most of the 100 ms, in every iteration
        arr = r["rank_arrival_us"]
        assert arr[1] >= 100_000 and arr[1] == max(arr)
        # everyone waited for it: each rank's own time holds the 100 ms (per op: / depth)
        assert min(r["rank_median_us"]) >= 100_000 / depth * 0.9, r["rank_median_us"]
        assert r["provenance"]["late_arrival_rank"].startswith("measured:")


def test_a_rank_slow_after_its_op_is_named_the_last_done(tmp_path):
    # Rank 1 sleeps 100 ms after each timed op completes (inside its sample, not before its op call):
    # it finishes last in every iteration and its median is the largest; it did not arrive late.
    for r in _delayed_run(tmp_path, "1:0.1@after"):
        assert r["last_done_rank"] == [1] * r["iterations"], r["label"]
        assert r["last_done_rank_hist"] == [0, r["iterations"], 0]
        med = r["rank_median_us"]
        assert len(med) == 3 and med[1] >= 100_000 and med[1] == max(med)
        assert r["rank_spread_us"]["max"] == med[1]
        assert max(r["rank_arrival_us"]) < 50_000  # nobody was held up before the op


@pytest.fixture(scope="module")
def bf16_run(tmp_path_factory):
    """One launch read by the two tests below: DTYPES=bf16, all_reduce-max and the barrier."""
    tmp = tmp_path_factory.mktemp("bf16")
    proc = _launch(tmp, "--dtypes", "bf16", "--", "-k", "all_reduce-max or barrier")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp


def test_a_barrier_says_it_has_nothing_to_check(bf16_run):
    (r,) = [r for r in _recs(bf16_run) if r["op"] == "barrier"]
    assert r["checked"] is False and r["n_wrong"] is None and "no data" in r["unchecked_reason"]
    assert r["provenance"]["time_us"].startswith("measured:")


def test_ranks_run_with_the_config_the_launcher_validated(bf16_run):
    import json

    written = json.loads((bf16_run / "results" / "run" / "config.json").read_text())
    run = load_bench(bf16_run)
    assert written == run["suite"]["config"] and written["dtypes"] == ["bfloat16"]
    data = [r for r in _recs(bf16_run) if r["op"] != "barrier"]
    assert data and {r["dtype"] for r in data} == {"bfloat16"}
