"""The what-if replay's step graph (suite/postmortem/replay/graph.py, whatif.py) on hand-made steps: the graph
reproduces what was recorded, the idealised step and the what-ifs move it as the ByteDance definitions say, and
the attribution names the rank or the stage that was slow. Times in milliseconds, written as seconds."""

from __future__ import annotations

import pytest

from suite.postmortem.replay.graph import END, RankStep, build, key_ops, replay
from suite.postmortem.replay.whatif import WhatIf, _share, analyse, changed, idealised, median_transfers

MS = 1e-3


def rank(r: int, start: float, end: float, *ops: tuple[str, float, float]) -> RankStep:
    return RankStep(r, start * MS, end * MS, key_ops([(n, a * MS, b * MS) for n, a, b in ops]))


def ddp_step(slow: float = 1.0, rank_slow: int = 1, n: int = 2) -> list[RankStep]:
    """``n`` ranks (two unless told), each: 10 ms of backward, one all_reduce (2 ms once all are there), 1 ms
    optimizer; rank ``rank_slow`` computes ``slow`` times slower, and the others wait for it in the all_reduce."""
    out = []
    arrive = 10 * slow
    for r in range(n):
        mine = 10 * (slow if r == rank_slow else 1.0)
        end_ar = arrive + 2
        out.append(rank(r, 0, end_ar + 1 * (slow if r == rank_slow else 1.0), ("all_reduce", mine, end_ar)))
    return out


def test_ops_are_keyed_by_name_and_order():
    ops = key_ops([("all_reduce", 3.0, 4.0), ("broadcast", 1.0, 2.0), ("all_reduce", 2.0, 2.5)])
    assert [o.key for o in ops] == [("broadcast", 0), ("all_reduce", 0), ("all_reduce", 1)]


def test_an_unchanged_replay_reproduces_the_recorded_step():
    g = build(ddp_step(slow=2.0))
    rp = replay(g)
    assert rp.time == pytest.approx(g.measured) and g.measured == pytest.approx(24 * MS)
    assert rp.end[1, ("all_reduce", 0)] == pytest.approx(22 * MS)
    assert g.transfer[0, ("all_reduce", 0)] == pytest.approx(2 * MS)  # its 10 ms wait for rank 1 is not transfer


def test_the_waiting_is_not_compute():
    g = build(ddp_step(slow=2.0))
    assert g.gap[0, ("all_reduce", 0)] == pytest.approx(10 * MS)
    assert g.gap[1, ("all_reduce", 0)] == pytest.approx(20 * MS)
    assert g.gap[0, END] == pytest.approx(1 * MS) and g.gap[1, END] == pytest.approx(2 * MS)


def test_an_op_that_ends_just_after_its_step_is_still_the_tails_start():
    steps = ddp_step(slow=2.0)
    steps[1] = rank(1, 0, 22.9, ("all_reduce", 20, 23))  # its clock puts the op's end 0.1 ms after the step's
    g = build(steps)
    assert g.pred[1, END] == ("all_reduce", 0) and g.gap[1, END] == pytest.approx(-0.1 * MS)  # not the whole step
    assert replay(g).time == pytest.approx(g.measured) and idealised(g, median_transfers([g])) < g.measured


def test_idealising_takes_the_median_compute_and_the_median_transfer():
    g = build(ddp_step(slow=3.0))
    # at two ranks the median is the mean: backward (10 + 30) / 2, the transfer's 2 ms, optimizer (1 + 3) / 2
    assert idealised(g, median_transfers([g])) == pytest.approx(24 * MS)


def test_one_straggler_among_three_leaves_none_of_its_compute_in_the_ideal():
    g = build(ddp_step(slow=3.0, rank_slow=2, n=3))
    # the clean ranks' 10 ms backward, 2 ms transfer, 1 ms optimizer (the mean would keep a third of rank 2's extra)
    assert idealised(g, median_transfers([g])) == pytest.approx(13 * MS)
    assert analyse([g], [])["M_W_pct"] == {"0": 0.0, "1": 0.0, "2": 100.0}


def test_a_rank_k_times_slower_is_the_straggler_run():
    clean, slow = build(ddp_step()), build(ddp_step(slow=2.0))
    assert changed(clean, WhatIf("rank", (1,), 2.0), {}) == pytest.approx(slow.measured)


def test_a_link_k_times_slower_stretches_only_the_transfers():
    g = build(ddp_step())
    assert changed(g, WhatIf("link", (0, 1), 3.0), {}) == pytest.approx((10 + 6 + 1) * MS)
    assert changed(g, WhatIf("link", (0, 1), 0.5), {}) == pytest.approx((10 + 1 + 1) * MS)


def test_a_planted_slow_rank_takes_the_whole_slowdown():
    graphs = [build(ddp_step(slow=2.0, rank_slow=1)) for _ in range(3)]
    out = analyse(graphs, [])
    assert out["replay_error_pct"] == 0.0
    assert out["slowdown"] == pytest.approx(24 / 18.5, rel=1e-3)
    assert out["M_W_pct"] == {"0": 0.0, "1": 100.0}
    assert out["M_S_pct"] is None
    assert out["slowdown_by_op_type"]["all_reduce"] == pytest.approx(1.0)


def test_a_clean_step_has_no_slowdown_to_attribute():
    out = analyse([build(ddp_step())], [WhatIf("rank", (0,), 2.0)])
    assert out["slowdown"] == pytest.approx(1.0) and out["M_W_pct"] == {"0": None, "1": None}
    assert out["whatifs"] == [{"what": "rank 0 2x slower", "step_ms": pytest.approx(24.0), "vs_replayed": 1.8462}]


def test_ops_that_overlap_compute_wait_for_no_one_before_them():
    """DDP's buckets: the second bucket's all_reduce starts while the first still runs; it does not wait for it."""
    steps = [
        rank(0, 0, 12, ("all_reduce", 4, 9), ("all_reduce", 6, 10)),
        rank(1, 0, 12, ("all_reduce", 4, 9), ("all_reduce", 6, 10)),
    ]
    g = build(steps)
    assert g.pred[0, ("all_reduce", 1)] is None and g.gap[0, ("all_reduce", 1)] == pytest.approx(6 * MS)
    assert g.pred[0, END] == ("all_reduce", 1)
    slower = changed(g, WhatIf("link", (0, 1), 2.0), {})
    assert slower == pytest.approx((6 + 8 + 2) * MS)  # the last bucket: its start, twice its 4 ms, the optimizer


def pipeline_step(stage1: float = 1.0) -> list[RankStep]:
    """A two-stage pipeline, one micro-batch: stage 0 computes 4 ms and sends (1 ms), stage 1 receives, computes
    4 ms x ``stage1`` (forward and backward), sends the gradient back, stage 0 receives it and computes 4 ms."""
    b = 5 + 4 * stage1
    return [
        rank(0, 0, b + 1 + 4, ("p2p 0->1", 4, 5), ("p2p 1->0", 5, b + 1)),
        rank(1, 0, b + 1, ("p2p 0->1", 0, 5), ("p2p 1->0", b, b + 1)),
    ]


def test_a_pipeline_replays_and_its_slow_stage_is_named():
    g = build(pipeline_step(stage1=3.0))
    assert g.peers[("p2p 0->1", 0)] == [0, 1]
    assert replay(g).time == pytest.approx(g.measured)
    assert changed(g, WhatIf("rank", (1,), 0.5), {}) == pytest.approx(16 * MS)
    out = analyse([g], [], stages={0: [0], 1: [1]})
    assert out["M_S_pct"]["1"] > 50 and out["M_S_pct"]["1"] > out["M_S_pct"]["0"]


def test_an_op_on_one_rank_alone_is_refused():
    with pytest.raises(ValueError, match="ran on rank 0 alone"):
        build([rank(0, 0, 5, ("all_reduce", 1, 2)), rank(1, 0, 5)])


def test_a_rank_that_starts_late_takes_its_lateness():
    """Rank 1 leaves the step's barrier 5 ms after rank 0, with the same compute: idealising rank 1 alone starts
    it with rank 0, which removes the whole slowdown."""
    late = [rank(0, 0, 18, ("all_reduce", 10, 17)), rank(1, 5, 18, ("all_reduce", 15, 17))]
    out = analyse([build(late)], [])
    assert out["replayed_ms"] == pytest.approx(18.0) and out["ideal_ms"] == pytest.approx(13.0)
    assert out["M_W_pct"] == {"0": 0.0, "1": 100.0}


@pytest.mark.parametrize(
    "t, fixed, ideal, share",
    [(10.0, 9.0, 8.0, 50.0), (10.0, 7.0, 8.0, 100.0), (10.0, 11.0, 8.0, 0.0), (10.0, 9.0, 9.95, None)],
)
def test_a_share_of_the_slowdown_stays_within_none_and_all_of_it(t, fixed, ideal, share):
    # fixing one rank alone can beat the whole idealisation (7 < 8) or make the step slower (11 > 10)
    assert _share(t, fixed, ideal) == share
