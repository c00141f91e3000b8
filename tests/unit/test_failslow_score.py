"""The fail-slow scorer: its intervals against published values, and its rules on hand-built trials."""

from __future__ import annotations

import pytest

from suite.report.failslow.intervals import bootstrap, median_interval, poisson_rate, wilson
from suite.report.failslow.score import THRESHOLD, Flag, Target, Trial, Truth, by_class, confusion, names, score

NODE1 = Target("node", "node1")
RANK2 = Target("rank", "2")
NODES = {"0": "node0", "1": "node0", "2": "node1", "3": "node1"}


def _ci(e):
    return (e.value, e.lo, e.hi)


def test_wilson_matches_the_published_intervals():
    # Brown, Cai & DasGupta (2001) / any Wilson calculator: 0/10 -> [0, 0.2775], 5/10 -> [0.2366, 0.7634]
    assert _ci(wilson(0, 10)) == pytest.approx((0.0, 0.0, 0.2775), abs=1e-4)
    assert _ci(wilson(5, 10)) == pytest.approx((0.5, 0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 0).value is None
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_garwood_matches_the_exact_poisson_intervals():
    # the chi-square form: 0 -> [0, 3.689], 1 -> [0.0253, 5.572], 10 -> [4.795, 18.39]
    assert _ci(poisson_rate(0, 1.0)) == pytest.approx((0.0, 0.0, 3.689), abs=1e-3)
    assert _ci(poisson_rate(1, 1.0)) == pytest.approx((1.0, 0.0253, 5.572), abs=1e-3)
    assert _ci(poisson_rate(10, 2.0)) == pytest.approx((5.0, 4.795 / 2, 18.39 / 2), abs=1e-2)
    assert poisson_rate(3, 0.0).value is None


def test_the_median_interval_is_the_order_statistics_that_cover_95_percent():
    xs = [10, 1, 9, 2, 8, 3, 7, 4, 6, 5]  # n = 10: [x(2), x(9)] covers 97.9%, [x(3), x(8)] only 89%
    assert _ci(median_interval(xs)) == (5.5, 2, 9)
    assert _ci(median_interval([3, 1, 2, 5, 4])) == (3, 1, 5)  # too few for 95%: the whole range
    assert median_interval([]).value is None


def test_a_bootstrap_is_the_same_from_the_same_seed():
    items = [0, 1, 1, 0, 1, 1, 1, 0, 1, 1]

    def mean(xs):
        return sum(xs) / len(xs)

    a, b = bootstrap(items, mean, seed=7), bootstrap(items, mean, seed=7)
    assert a == b and a.value == 0.7 and a.lo < 0.7 < a.hi


def _trial(truth=None, *flags, run_s=60.0):
    return Trial(truth=truth, flags=tuple(flags), run_s=run_s, node_of=NODES)


def _truth(target=NODE1, onset=20.0, slow=0.5, cls="cpu-quota", sev=0.5):
    return Truth(cls=cls, target=target, onset_s=onset, severity=sev, step_slowdown=slow)


def test_found_missed_false_alarms_and_localisation_follow_the_rules():
    trials = [
        _trial(_truth(), Flag(RANK2, 26.0)),  # found; a rank of the node names the node
        _trial(_truth(), Flag(Target("node", "node0"), 24.0)),  # found, the wrong node
        _trial(_truth()),  # missed
        _trial(_truth(), Flag(NODE1, 10.0)),  # only a flag before the onset: missed, and one false alarm
        _trial(None),  # clean, quiet
        _trial(None, Flag(RANK2, 5.0)),  # clean, one false alarm
        _trial(_truth(slow=THRESHOLD / 2), Flag(NODE1, 30.0)),  # below the threshold: sensitivity only
    ]
    s = score(trials)
    assert (s.positives, s.found, s.clean, s.false_positive_trials) == (4, 2, 2, 1)
    assert s.recall.value == 0.5 and s.precision.value == pytest.approx(2 / 3)
    assert s.f1.value == pytest.approx(2 * 2 / (2 * 2 + 1 + 2))
    assert s.localisation.value == 0.5
    assert _ci(s.time_to_detect_s)[0] == 5.0  # median of 6 s and 4 s
    # clean time: 2 clean runs of 60 s + 20 s before each of the 5 onsets; two false alarms in it
    assert s.false_alarms_per_hour.value == pytest.approx(2 / ((2 * 60 + 5 * 20) / 3600))
    assert s.sensitivity.value == 1.0


def test_a_link_is_named_either_way_and_a_rank_only_by_itself():
    assert names(Target("link", "1->0"), Target("link", "0->1"), {})
    assert not names(Target("link", "0->2"), Target("link", "0->1"), {})
    assert names(RANK2, NODE1, NODES) and not names(NODE1, RANK2, NODES)
    assert not names(Target("rank", "1"), RANK2, NODES)
    # a node of one rank (the compose simulation at one rank per node) names that rank, and only it
    assert names(NODE1, RANK2, {"0": "node0", "2": "node1"}) and not names(NODE1, RANK2, {"1": "node1", "2": "node1"})
    with pytest.raises(ValueError):
        Target("gpu", "0")


def test_scores_per_class_each_see_every_clean_trial_and_the_confusion_matrix_counts_first_flags():
    trials = [
        _trial(_truth(cls="pause", sev=0.3), Flag(RANK2, 30.0), Flag(NODE1, 40.0)),
        _trial(_truth(cls="cpu-quota", sev=0.5, target=RANK2)),
        _trial(None, Flag(NODE1, 1.0)),
    ]
    per = by_class(trials)
    assert set(per) == {("cpu-quota", 0.5), ("pause", 0.3)}
    assert per[("pause", 0.3)].clean == per[("cpu-quota", 0.5)].clean == 1
    assert per[("pause", 0.3)].found == 1 and per[("cpu-quota", 0.5)].found == 0
    assert confusion(trials) == {
        "node node1": {"rank 2": 1},
        "rank 2": {"nothing": 1},
        "clean": {"node node1": 1},
    }


def test_a_clean_trials_foreign_load_flag_is_counted_apart_and_an_injected_trials_flag_scores_as_ever():
    """A flag the watch classed ``foreign load`` (a neighbour of the run's on its host) is, on a clean trial, neither
    a false alarm nor found: counted apart. The watch classes it without the truth, so on an injected trial (a
    ``noisy`` neighbour's processes are outside the run too) it is found after the onset, a false alarm before."""
    foreign = Flag(RANK2, 30.0, foreign=True)
    trials = [
        _trial(None, Flag(RANK2, 5.0, foreign=True)),  # clean, a neighbour: apart
        _trial(None, Flag(RANK2, 5.0)),  # clean, not classed so: a false alarm
        _trial(_truth(cls="noisy", target=RANK2), foreign),  # injected: found, named right
        _trial(_truth(cls="noisy", target=RANK2), Flag(RANK2, 10.0, foreign=True)),  # before the onset: false alarm
    ]
    s = score(trials)
    assert (s.positives, s.found, s.clean, s.false_positive_trials, s.foreign_load_trials) == (2, 1, 2, 1, 1)
    assert s.localisation.value == 1.0
    assert s.false_alarms_per_hour.value == pytest.approx(2 / ((2 * 60 + 2 * 20) / 3600))
    assert confusion(trials[:1]) == {"clean": {"foreign load": 1}}
    assert confusion(trials[:2]) == {"clean": {"foreign load": 1, "rank 2": 1}}


def test_sensitivity_counts_an_injection_below_10_percent_found_only_when_named_right():
    """Below the threshold a flag on another target says nothing of the injection: not found."""
    weak = _truth(slow=THRESHOLD / 2, target=RANK2)
    trials = [
        _trial(weak, Flag(RANK2, 30.0)),  # named right
        _trial(weak, Flag(Target("rank", "1"), 30.0)),  # another rank after the onset: not found
        _trial(weak, Flag(Target("rank", "1"), 25.0), Flag(RANK2, 30.0)),  # the first after the onset is wrong
        _trial(weak),  # nothing
    ]
    s = score(trials)
    assert s.sensitivity.value == 0.25 and (s.positives, s.found) == (0, 0)
