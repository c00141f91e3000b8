"""Compute contention in the what-if (suite/postmortem/replay/share.py, wired in whatif.py and cli.py) on hand-made
timelines: 3 ranks on 2 cores, one of them asleep while the others compute. Times in milliseconds, as seconds."""

from __future__ import annotations

import pytest

from suite.postmortem.replay import share
from tests.unit.test_replay_graph import MS


def test_busy_intervals_merge_and_count_the_ranks_busy_at_once():
    assert share.merge([(3, 4), (0, 1), (0.5, 2), (2, 2.5), (5, 5)]) == [(0, 2.5), (3, 4)]
    assert share.counts({0: [(0, 10)], 1: [(5, 15)], 2: []}) == [(0, 5, 1), (5, 10, 2), (10, 15, 1)]


def test_a_segment_computed_beside_a_sleeping_rank_had_a_core_of_its_own():
    """Ranks 0 and 2 compute 10 ms while rank 1 sleeps: 2 ranks on 2 cores, 10 ms of work each; with all three
    computing at once that work takes 15 ms."""
    busy = {0: [(0, 10 * MS)], 1: [], 2: [(0, 10 * MS)]}
    pieces = share.counts(busy)
    b, w = share.segment(0, 10 * MS, busy[0], pieces, cores=2)
    assert (b, w) == pytest.approx((10 * MS, 10 * MS))
    assert share.priced(10 * MS, b, w, cores=2, n=3) == pytest.approx(15 * MS)


def test_a_segment_computed_beside_every_rank_is_priced_as_it_was():
    busy = {r: [(0, 15 * MS)] for r in range(3)}
    b, w = share.segment(0, 15 * MS, busy[1], share.counts(busy), cores=2)
    assert w == pytest.approx(10 * MS)  # a 2/3 share of a core for 15 ms
    assert share.priced(15 * MS, b, w, cores=2, n=3) == pytest.approx(15 * MS)


def test_idle_time_in_a_segment_is_kept_and_only_its_busy_part_is_stretched():
    """A 20 ms segment: 5 ms of CPU alone, 15 ms asleep."""
    busy = {0: [(2 * MS, 7 * MS)], 1: []}
    b, w = share.segment(0, 20 * MS, busy[0], share.counts(busy), cores=1)
    assert share.priced(20 * MS, b, w, cores=1, n=2) == pytest.approx(25 * MS)
    assert share.priced(20 * MS, b, w, cores=2, n=2) == pytest.approx(20 * MS)  # ranks <= cores: unchanged
