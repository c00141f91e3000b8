"""The what-if replay's step graph (suite/postmortem/replay/graph.py, whatif.py) on hand-made steps: the graph
reproduces what was recorded, the idealised step and the what-ifs move it as the ByteDance definitions say, and
the attribution names the rank or the stage that was slow. Times in milliseconds, written as seconds."""

from __future__ import annotations

import pytest

from suite.postmortem.replay.graph import BY_GROUP, BY_NAME, END, RankStep, build, key_ops, replay
from suite.postmortem.replay.timeline import chrome_trace
from suite.postmortem.replay.whatif import (
    AtRanks,
    WhatIf,
    _share,
    analyse,
    changed,
    idealised,
    median_transfers,
    probe_compute,
    spans_every_rank,
)

MS = 1e-3


def rank(r: int, start: float, end: float, *ops: tuple) -> RankStep:
    """Rank ``r``'s step in ms; each op (name, start, end) or (name, start, end, (group, seq, its ranks))."""
    return RankStep(r, start * MS, end * MS, key_ops([(o[0], o[1] * MS, o[2] * MS, *o[3:]) for o in ops]))


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


def test_ops_with_a_group_are_keyed_by_its_sequence_numbers_not_their_start():
    """Gloo runs a group's ops on two threads: the later-issued one (seq 9) can start a moment first."""
    ops = key_ops(
        [("all_reduce", 2.0, 3.0, ("1", 8, (0, 1))), ("all_reduce", 1.9, 2.5, ("1", 9, (1, 0))), ("broadcast", 1, 2)]
    )
    assert [o.key for o in ops] == [("broadcast", 0), ("all_reduce", 1, "pg 1"), ("all_reduce", 0, "pg 1")]
    assert ops[1].group == (0, 1) and ops[0].group is None


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


def three_stages(stage1: float = 1.0) -> list[RankStep]:
    """Three stages, one micro-batch, each stage's forward 4 ms and backward 4 ms (stage 1's ``stage1`` times as
    long), the last stage's together: a send returns in 0.1 ms, its recv ends 1 ms after both are there, and each
    stage posts its recv as soon as it can (no compute before it)."""
    f = 4 * stage1
    a = 4 + 1  # stage 1 has its input
    b = a + f + 1  # stage 2 has its input
    c = b + 8 + 1  # stage 1 has its gradient
    d = c + f + 1  # stage 0 has its gradient
    return [
        rank(0, 0, d + 4, ("p2p 0->1", 4, 4.1), ("p2p 1->0", 4.1, d)),
        rank(
            1,
            0,
            c + f + 0.1,
            ("p2p 0->1", 0, a),
            ("p2p 1->2", a + f, a + f + 0.1),
            ("p2p 2->1", a + f + 0.1, c),
            ("p2p 1->0", c + f, c + f + 0.1),
        ),
        rank(2, 0, c - 1 + 0.1, ("p2p 1->2", 0, b), ("p2p 2->1", b + 8, b + 8 + 0.1)),
    ]


def test_a_balanced_pipeline_without_a_straggler_is_its_own_ideal():
    """No stage's compute is another's (they run different layers), and a send's transfer is not its recv's: the
    ideal of a balanced pipeline is the step itself. The median across the two ranks of an op's segment and
    transfer made it shorter here; on the compose simulation, 1.7 times longer (S = 0.55, a 3-rank pp_gpipe)."""
    g = build(three_stages())
    assert replay(g).time == pytest.approx(g.measured)
    out = analyse([g], [], stages={0: [0], 1: [1], 2: [2]})
    assert out["slowdown"] == pytest.approx(1.0) and out["M_S_pct"] == {"0": None, "1": None, "2": None}


def test_a_pipelines_slow_stage_is_idealised_to_the_median_stages_compute():
    slow, balanced = build(three_stages(stage1=3.0)), build(three_stages())
    out = analyse([slow], [], stages={0: [0], 1: [1], 2: [2]})
    assert out["ideal_ms"] == pytest.approx(balanced.measured / MS)  # stage 1's 24 ms down to the median's 8
    assert out["M_S_pct"]["1"] == 100.0 and out["M_S_pct"]["0"] == out["M_S_pct"]["2"] == 0.0


TP = {0: ("3", (0, 1)), 1: ("3", (0, 1)), 2: ("4", (2, 3)), 3: ("4", (2, 3))}
DP = {0: ("1", (0, 2)), 2: ("1", (0, 2)), 1: ("2", (1, 3)), 3: ("2", (1, 3))}
"""A 2-D mesh of four ranks: rank -> (its group's name, the group's ranks), tensor parallel and data parallel."""


def mesh_step(grouped: bool = True) -> list[RankStep]:
    """One 2-D step: ranks 0 and 1 compute 10 ms, all-reduce in their TP group (2 ms), compute 20 ms and all-reduce
    in their DP group; ranks 2 and 3 compute 20 ms, all-reduce in theirs, compute 2 ms and wait in the DP all-reduce
    for their DP peer (0 or 1) until 32 ms; every rank ends at 35 ms. ``grouped``: each op carries its group and
    c10d sequence number (as the flight recorder has them), else only its name and times."""
    times = {0: ((10, 12), (32, 34)), 2: ((20, 22), (24, 34))}
    out = []
    for r in range(4):
        tp, dp = times[r & 2]
        ops = [("all_reduce", *tp, (TP[r][0], 1, TP[r][1])), ("all_reduce", *dp, (DP[r][0], 1, DP[r][1]))]
        out.append(rank(r, 0, 35, *(o if grouped else o[:3] for o in ops)))
    return out


def test_ops_of_two_process_groups_match_on_group_and_sequence_number():
    g = build(mesh_step())
    assert g.matched_on == BY_GROUP
    assert g.peers == {
        ("all_reduce", 0, "pg 3"): [0, 1],
        ("all_reduce", 0, "pg 4"): [2, 3],
        ("all_reduce", 0, "pg 1"): [0, 2],
        ("all_reduce", 0, "pg 2"): [1, 3],
    }
    assert replay(g).time == pytest.approx(g.measured) == pytest.approx(35 * MS)
    # rank 2 twice as slow delays its TP peer 3 and, through the DP all-reduce, rank 0: 40 + 2 (TP), 4 + 2 (DP), 1
    assert changed(g, WhatIf("rank", (2,), 2.0), {}) == pytest.approx(50 * MS)
    trace = chrome_trace(g, replay(g), replay(g), "test_sharded[2d]")
    assert {e["args"]["group"] for e in trace["traceEvents"] if e.get("cat") == "op"} == {
        "pg 1",
        "pg 2",
        "pg 3",
        "pg 4",
    }


def test_ops_matched_on_their_names_alone_mix_the_groups_up():
    """What matching on names did to the same step: rank 0's TP all-reduce taken for one op with ranks 2 and 3's,
    so in the replay it waits for them until 20 ms, then computes 20 ms: 43 ms, not the 35 measured."""
    g = build(mesh_step(grouped=False))
    assert g.matched_on == BY_NAME and g.peers[("all_reduce", 0)] == [0, 1, 2, 3]
    assert replay(g).time == pytest.approx(43 * MS) and g.measured == pytest.approx(35 * MS)


def test_n_ranks_replays_the_idealised_step_with_the_transfers_and_compute_at_n():
    """The "N ranks" what-if: the idealised step (24 ms), the all-reduce 1 ms longer at N; with a probe's compute
    at N (15 ms of backward, 2 of optimizer): 15 + 3 + 2. A 2-D step's groups at N are a mesh's: not modelled."""
    g = build(ddp_step(slow=3.0))
    at = AtRanks({("all_reduce", 0): 1 * MS})
    assert changed(g, WhatIf("ranks", (4,), at=at), median_transfers([g])) == pytest.approx(24 * MS + 1 * MS)
    probe = AtRanks(at.extra, {("all_reduce", 0): 15 * MS, END: 2 * MS})
    assert changed(g, WhatIf("ranks", (4,), at=probe), median_transfers([g])) == pytest.approx(20 * MS)
    assert spans_every_rank([g]) and not spans_every_rank([build(mesh_step())])
    assert probe_compute([build(mesh_step())], set(g.peers)) is None  # not the step's ops


def test_an_op_missing_on_a_rank_of_its_group_is_refused():
    steps = mesh_step()
    steps[1] = rank(1, 0, 35, ("all_reduce", 32, 34, (DP[1][0], 1, DP[1][1])))  # its TP all-reduce not recorded
    with pytest.raises(ValueError, match=r"op all_reduce #0 of pg 3 ran on ranks \[0\] of its group's \[0, 1\]"):
        build(steps)


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
