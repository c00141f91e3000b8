"""The planted faulty backend through the launcher, as a user runs it: the cases it is armed for fail with status 6
and the symptom in words, the others are right, and every record says it was made on the planted backend."""

import pytest

from tests.conftest import load_bench, run_suite, small_run

pytestmark = pytest.mark.slow


def _stale_all_reduce_run(tmp_path, *args: str):
    """A 2-rank run of ``args`` on the backend whose all_reduce returns its previous result again: it must end
    with status 6 (EXIT_WRONG_RESULT); the process and the run's records."""
    proc = run_suite(tmp_path, *args, nproc=2, env={"SUITE_INJECT_BACKEND": "stale:all_reduce"})
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]


def test_a_stale_all_reduce_fails_with_status_6_naming_the_stale_output(tmp_path):
    # The check run and the timed buffers have different seeds: the all_reduce that returns its first result
    # again is wrong in the timed check. With one seed for both (the suite before seeds) it passed.
    proc, recs = _stale_all_reduce_run(tmp_path, *small_run("all_reduce-sum or all_gather-", iters=2))
    stale = [r for r in recs if r["op"] == "all_reduce"]
    others = [r for r in recs if r["op"] != "all_reduce"]
    assert stale and others
    for r in stale:
        assert r["n_wrong"] > 0 and r["planted_fault"] == "backend stale", r
        assert any("holds the check run's result again (stale" in line for line in r["wrong_found"]), r["wrong_found"]
    assert all(r["n_wrong"] == 0 and r["planted_fault"] == "backend stale (not armed for this case)" for r in others)
    assert "holds the check run's result again" in proc.stdout + proc.stderr  # the failure message says it


def test_a_faulty_backend_switch_with_an_unknown_class_exit_2_before_any_rank(tmp_path):
    proc = run_suite(tmp_path, *small_run("all_reduce"), env={"SUITE_INJECT_BACKEND": "dropped"})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.startswith("error: SUITE_INJECT_BACKEND='dropped': unknown fault 'dropped'")
    assert not (tmp_path / "results").exists()


def test_placement_checks_fresh_data_so_a_stale_all_reduce_fails_them(tmp_path):
    # The placement experiment's all_reduce cases (pinning, the group and hierarchy cases) built their inputs and
    # expected values from one fixed seed, so an all_reduce that returned its check run's result again passed.
    placement = ["--experiments", "placement", "--min-bytes", "1K", "--max-bytes", "1K", "--iters", "2"]
    _, recs = _stale_all_reduce_run(tmp_path, *placement, "--warmup", "1")
    armed = [r for r in recs if r["planted_fault"] == "backend stale"]
    assert armed and all(r["n_wrong"] > 0 for r in armed), [(r["label"], r["n_wrong"]) for r in armed]
    assert all(r["n_wrong"] in (0, None) for r in recs if r not in armed)  # None: the topology record, unchecked
