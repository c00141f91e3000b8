"""suite.compare with synthetic runs: run-level medians, the between-run variance (measured from
several runs per side, or the one-run-each rule), simultaneous intervals, and the verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from suite import compare

N_CASES = 60


def _rec(i: int, samples) -> dict:
    s = [float(v) for v in samples]
    return {
        "experiment": "synthetic",
        "op": "all_reduce",
        "backend": "gloo",
        "device": "cpu",
        "world_size": 2,
        "timing_mode": "blocking",
        "dtype": "float32",
        "size_bytes": 1024 * (i + 1),
        "identity": [],
        "samples_us": s,
        "time_us": float(np.median(s)),
        "peak_mem_bytes": int(1e6 + 1000 * s[0]),
    }


def _run(
    rng, run_sd: float, factor=lambda i: 1.0, n: int = 20, within_sd: float = 0.02, n_cases: int = N_CASES
) -> list[dict]:
    """One run: every case's samples around 100·(i+1) µs, each case's run median shifted by its own
    lognormal(run_sd) factor (between-run variation case by case; ``_shifted_runs`` shifts whole
    runs), times ``factor(i)``."""
    return [
        _rec(i, 100.0 * (i + 1) * factor(i) * math.exp(rng.normal(0, run_sd)) * np.exp(rng.normal(0, within_sd, n)))
        for i in range(n_cases)
    ]


def test_one_run_each_with_between_run_noise_is_same_for_every_case():
    # two runs of one commit on a noisy machine: each case's run median moves by ~30% between runs,
    # far more than the within-run samples suggest; the old comparison called such cases slower/faster
    rng = np.random.default_rng(7)
    a, b = _run(rng, 0.3), _run(rng, 0.3)
    c = compare.compare_records(a, b, n_boot=300)
    assert len(c.cases) == N_CASES and not c.only_base and not c.only_new  # peak memory is no identity
    assert [x.verdict for x in c.cases] == ["same"] * N_CASES
    assert c.overall == "same" and not c.failed
    assert c.base_runs == c.new_runs == 1 and "one run per side" in c.between_run_note
    assert c.between_run_sd == pytest.approx(0.3, rel=0.35)  # the rule recovers the run-to-run sd
    text = compare.format_comparison(c)
    assert "(1 run(s))" in text and "one run per side" in text


def test_one_run_each_still_flags_a_uniform_slowdown_and_a_lone_outlier():
    rng = np.random.default_rng(8)
    a = _run(rng, 0.0)
    c = compare.compare_records(a, _run(rng, 0.0, lambda i: 1.2), n_boot=300)
    assert c.overall == "slower" and c.failed and all(x.verdict == "slower" for x in c.cases)
    # one case 3x slower among quiet ones: the spread of the others does not hide it
    c = compare.compare_records(a, _run(rng, 0.02, lambda i: 3.0 if i == 5 else 1.0), n_boot=300)
    slower = [i for i, x in enumerate(c.cases) if x.verdict == "slower"]
    assert slower == [5] and c.cases[5] in c.regressions


def test_several_runs_per_side_measure_the_between_run_variance():
    rng = np.random.default_rng(9)
    base = [_run(rng, 0.1) for _ in range(3)]
    same = [_run(rng, 0.1) for _ in range(3)]
    c = compare.compare_runs(base, same, n_boot=500)
    assert c.base_runs == c.new_runs == 3 and "from the runs' medians" in c.between_run_note
    assert c.between_run_sd == pytest.approx(0.1, rel=0.3)
    assert all(x.verdict == "same" for x in c.cases) and c.overall == "same"
    assert all(x.base_runs == 3 and x.new_runs == 3 for x in c.cases)
    # a real 2x change of one case is found through that variance; a 20% change of all is found overall
    c = compare.compare_runs(base, [_run(rng, 0.1, lambda i: 2.0 if i == 3 else 1.0) for _ in range(3)], n_boot=500)
    assert [i for i, x in enumerate(c.cases) if x.verdict != "same"] == [3] and c.cases[3].verdict == "slower"
    c = compare.compare_runs(base, [_run(rng, 0.1, lambda i: 1.2) for _ in range(3)], n_boot=500)
    assert c.overall == "slower" and c.overall_ratio == pytest.approx(1.2, rel=0.05)


def test_a_noisy_run_widens_its_case_beyond_what_its_samples_say():
    # many samples make each run's median precise (narrow within-run interval), but the runs disagree
    rng = np.random.default_rng(10)
    base = [_run(rng, 0.15, n=200, n_cases=10) for _ in range(4)]
    new = [_run(rng, 0.15, n=200, n_cases=10) for _ in range(4)]
    c = compare.compare_runs(base, new, n_boot=500)
    assert all(x.verdict == "same" for x in c.cases)
    width = np.median([math.log(x.ci_high / x.ci_low) for x in c.cases])
    assert width > 0.3  # from the between-run sd 0.15, not the ~0.003 of a 200-sample median


def test_the_ratio_is_the_median_of_run_medians():
    # base: one long run at 100 µs and two short runs at 200 µs; pooled samples would say 100
    base = [[_rec(0, [100.0] * 20)], [_rec(0, [200.0] * 5)], [_rec(0, [200.0] * 5)]]
    new = [[_rec(0, [200.0] * 5)]]
    c = compare.compare_runs(base, new)
    assert c.cases[0].base_median_us == 200.0 and c.cases[0].ratio == pytest.approx(1.0)


def test_a_side_missing_a_case_in_one_run_uses_the_runs_that_have_it():
    rng = np.random.default_rng(11)
    r1, r2 = _run(rng, 0.05), _run(rng, 0.05)
    c = compare.compare_runs([r1, r2[1:]], [_run(rng, 0.05)], n_boot=300)
    assert len(c.cases) == N_CASES and c.cases[0].base_runs == 1 and c.cases[1].base_runs == 2


def test_holm_adjustment():
    assert compare.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert compare.holm([0.2, math.nan]) == [pytest.approx(0.4), pytest.approx(math.nan, nan_ok=True)]


def _shifted_runs(rng, factors, n_cases: int = N_CASES) -> list[list[dict]]:
    """Runs whose every case is shifted by the run's own factor (a machine busier during that run)."""
    return [[_rec(i, 100.0 * (i + 1) * f * np.exp(rng.normal(0, 0.02, 20))) for i in range(n_cases)] for f in factors]


def test_a_shift_common_to_whole_runs_reaches_the_overall_interval():
    # one commit, three runs a side; two of the base runs happened on a busier machine (x1.3 for every case):
    # the median of run medians differs by 0.77 between the sides, but only because of whole-run shifts
    rng = np.random.default_rng(11)
    base, new = _shifted_runs(rng, [1.0, 1.3, 1.3]), _shifted_runs(rng, [1.0, 1.0, 1.3])
    c = compare.compare_runs(base, new, n_boot=400)
    assert c.overall_ratio == pytest.approx(1 / 1.3, rel=0.05)
    assert c.overall_ci[1] > 1.0  # the run-level spread is in it (resampling cases alone: about 0.78)
    assert c.overall == "same" and not c.failed


def test_a_case_without_a_positive_time_is_reported_not_dropped_silently():
    rng = np.random.default_rng(3)
    a, b = _run(rng, 0.0), _run(rng, 0.0)
    b[0] = {**b[0], "samples_us": [0.0] * 20, "time_us": 0.0}
    c = compare.compare_records(a, b, n_boot=200)
    assert len(c.cases) == N_CASES - 1 and c.unusable == [compare.case_key(a[0])]
    assert "not compared (no positive median time in some run)" in compare.format_comparison(c)
