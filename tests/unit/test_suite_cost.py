"""``make suite-cost`` (scripts/suite_cost.py): the suite's own cost per op, in one process, on one-rank groups.

Its numbers are a benchmark (docs/measurements/), not asserted here; what is tested is what it runs and prints: the
table per backend and size with an interval, the structural probe (no journal entry put inside a timed sample),
the refusal of bad arguments, and the interval arithmetic."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import rounds_ci  # noqa: E402
import suite_cost  # noqa: E402


def test_suite_cost_prints_the_added_time_with_its_interval_and_no_journal_write_inside_a_sample():
    r = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "suite-cost", "COST_BACKENDS=null", "COST_SIZES=1024,65536",
         "COST_ITERS=30", "COST_ROUNDS=2", "WARMUP=2", "COST_GAP_US=1.5"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    rows = re.findall(r"^\| null \| (\d+) KiB \| ([\d.]+) \| [+-][\d.]+ \[[+-][\d.]+, [+-][\d.]+\] \|", r.stdout, re.M)
    assert [size for size, _ in rows] == ["1", "64"], r.stdout
    assert "load average" in r.stdout and "the bare loop busy-waits 1.5 us before each sample" in r.stdout
    probe = re.search(r"^\| null \|(?: [\d.-]+ \|){6} (\d+) \|$", r.stdout, re.M)
    assert probe and probe.group(1) == "0", r.stdout


@pytest.mark.parametrize("args", [["--backends", "nccl"], ["--sizes", "1000,6"], ["--rounds", "1"], ["--warmup", "0"]])
def test_suite_cost_rejects_bad_arguments_before_starting_a_group(args):
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "suite_cost.py"), *args], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and r.stderr.startswith("error: ") and len(r.stderr.splitlines()) == 1


def test_the_budget_is_one_percent_of_the_op_or_half_a_microsecond():
    assert suite_cost.budget_us(3.8) == 0.5 and suite_cost.budget_us(200.0) == pytest.approx(2.0)


def test_a_mean_over_rounds_has_students_interval_and_the_rounds_that_would_narrow_it():
    m, lo, hi = rounds_ci.mean_ci([1.0, 2.0, 3.0, 4.0])
    # t(0.975, 3) = 3.182; sd = 1.291; half = 3.182 * 1.291 / 2
    assert m == 2.5 and hi - m == pytest.approx(3.182 * 1.2910 / 2, rel=2e-3) and m - lo == pytest.approx(hi - m)
    assert rounds_ci.mean_ci([5.0]) == (5.0, -math.inf, math.inf)
    assert rounds_ci.t_quantile(0.95, 10) == pytest.approx(2.228, rel=2e-3)
    # sd 1.291: half-width 0.1 needs (1.96 * 1.291 / 0.1)^2 = 641 rounds; never fewer than were run
    assert rounds_ci.rounds_for([1.0, 2.0, 3.0, 4.0], 0.1) == 641
    assert rounds_ci.rounds_for([1.0, 2.0, 3.0, 4.0], 100.0) == 4 and rounds_ci.rounds_for([1.0], 0.1) is None


def test_the_median_over_rounds_has_the_sign_tests_interval_which_a_few_far_rounds_do_not_widen():
    # 20 rounds: between the 6th smallest and the 6th largest (P(Bin(20, 1/2) <= 5) = 0.021 <= 0.025 < 0.058)
    assert rounds_ci.median_ci([float(x) for x in range(1, 21)]) == (10.5, 6.0, 15.0)
    assert rounds_ci.median_ci([float(x) for x in range(1, 11)]) == (5.5, 2.0, 9.0)
    assert rounds_ci.median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) == (3.0, -math.inf, math.inf)  # too few rounds
    calm = [0.3, 0.4, 0.5] * 6 + [0.4, 0.4]
    burst = calm[:-2] + [30.0, -25.0]  # two rounds a burst of load fell in, one on each side
    assert rounds_ci.median_ci(burst) == rounds_ci.median_ci(calm) == (0.4, 0.3, 0.5)
    assert rounds_ci.mean_ci(burst)[2] - rounds_ci.mean_ci(burst)[1] > 10 * (0.5 - 0.3)


def test_the_budget_verdict_reads_the_median_so_two_far_rounds_do_not_turn_it():
    calm = [0.3, 0.4, 0.45] * 6 + [0.4, 0.4]
    burst = calm[:-2] + [30.0, -2.0]  # a vCPU's wake-up or a burst of load in two rounds
    assert suite_cost.within_budget(calm, 0.5) == suite_cost.within_budget(burst, 0.5) == "yes"
    assert rounds_ci.mean_ci(burst)[2] > 0.5  # the mean's interval reaches past the budget
    assert suite_cost.within_budget([0.3, 0.45, 0.9] * 7, 0.5) == "median only"
    assert suite_cost.within_budget([0.6, 0.7, 0.8] * 7, 0.5) == "NO"


def test_a_piece_over_its_base_is_the_median_of_paired_rounds_so_load_between_loops_is_not_read_as_cost():
    """A fake CPU clock: each call costs its own time plus the machine's load of the moment (the same for both
    loops of a round, higher in every other stretch of 1,000 us). The piece costs 0.2 us over its base: paired
    rounds give 0.2 exactly; a round a stretch's edge falls across is one of nine and the median leaves it out."""
    t = [0.0]

    def load() -> float:
        return 0.0 if int(t[0] * 1e6 // 1000) % 2 == 0 else 5.0

    def costing(us: float):
        def call() -> None:
            t[0] += (us + load()) * 1e-6

        return call

    got = suite_cost.added_per_call_us(costing(1.2), costing(1.0), calls=20, rounds=9, clock=lambda: t[0])
    assert got == pytest.approx(0.2, abs=1e-6)
    assert suite_cost.added_per_call_us(costing(1.0), costing(1.0), calls=20, rounds=9, clock=lambda: t[0]) == (
        pytest.approx(0.0, abs=1e-6)
    )
