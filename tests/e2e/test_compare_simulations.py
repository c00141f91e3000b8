"""The comparison's simulations of tests/unit/test_compare.py at full length (pure, tens of seconds, so
not in the unit tier): 200 same-commit trials with heterogeneous noise flag a case in at most alpha of
them, and a 2x slowdown of the noisy cases is found in 20 trials with the runs the comparison asks for."""

import suite.report.compare.verdicts as verdicts
from tests.helpers.compare_runs import same_commit_trials, slowdown_trials


def test_same_commit_with_heterogeneous_noise_flags_a_case_in_at_most_alpha_of_200_trials():
    flagged, failed = same_commit_trials(200)
    assert flagged <= verdicts.DEFAULT_ALPHA * 200 and failed <= verdicts.DEFAULT_ALPHA * 200, (flagged, failed)


def test_a_slowdown_of_noisy_cases_is_found_in_18_of_20_trials():
    found, cases_found, cases_found_at_2 = slowdown_trials(20)
    assert found >= 18 and cases_found >= 0.75 * 80, (found, cases_found)
    assert cases_found_at_2 < 0.5 * 80
