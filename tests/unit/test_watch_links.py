"""The watch's link probe's pure logic (suite/watch/links.py): when every rank probes, what a probe's table names, and
the flag it gives; the probe itself runs on real Gloo ranks in tests/dist/test_watch_links_dist.py."""

from __future__ import annotations

import pytest

from suite.watch import detect, links

MS = 1e-3


def test_every_rank_probes_once_the_jobs_step_holds_slower_than_its_own_past():
    pace = links.Pace()
    steps = [0.5, 0.02, 0.021, 0.019, 0.02, 0.031, 0.05, 0.05]  # warm-up, past 20 ms, 31 ms (1.55x), then 2.5x
    due = [pace.due(s, nodes=2) for s in steps]
    assert due == [False] * 6 + [True, False]  # two slow exchanges in a row; then not again at once
    assert pace.ratio() == pytest.approx(2.5)
    for _ in range(links.AGAIN - 2):
        assert not pace.due(0.05, nodes=2)
    assert pace.due(0.05, nodes=2)  # a probe that named nothing: again AGAIN exchanges later
    pace.done = True  # one that named something: never again
    assert not any(pace.due(0.05, nodes=2) for _ in range(3 * links.AGAIN))
    one = links.Pace()  # one node: no link between nodes to probe
    assert not any(one.due(s, nodes=1) for s in steps + [0.05] * 20)


def test_a_probe_names_a_node_whose_every_link_out_is_slow_else_one_link_else_nothing():
    two = {("node0", "node1"): [0.6 * MS, 0.5 * MS, 0.7 * MS], ("node1", "node0"): [42 * MS, 41 * MS, 44 * MS]}
    kind, name, ratio = links.named(two)
    assert (kind, name) == ("node", "node1") and ratio == pytest.approx(41 / 0.5)
    alike = {("node0", "node1"): [0.6 * MS] * 3, ("node1", "node0"): [0.7 * MS] * 3}
    assert links.named(alike) is None
    jitter = {("node0", "node1"): [0.3 * MS] * 3, ("node1", "node0"): [0.9 * MS] * 3}  # 3x, but 0.6 ms: a loaded host
    assert links.named(jitter) is None
    fast = {p: [1 * MS] * 3 for p in links.pairs({"node0": (0,), "node1": (1,), "node2": (2,)})}
    assert links.named(fast) is None
    one_link = {**fast, ("node0", "node2"): [9 * MS] * 3}  # node0's other link is fast: the link, not the node
    assert links.named(one_link)[:2] == ("link", "node0->node2")
    egress = {**fast, ("node2", "node0"): [9 * MS] * 3, ("node2", "node1"): [8 * MS] * 3}
    assert links.named(egress)[:2] == ("node", "node2")


def test_the_flag_names_the_nodes_ranks_and_says_each_links_time():
    table = {("node0", "node1"): [0.6 * MS, 0.5 * MS, 0.7 * MS], ("node1", "node0"): [42 * MS, 41 * MS, 44 * MS]}
    nodes = {"node0": (0, 1), "node1": (2, 3)}
    f = links.flag(table, links.named(table), nodes, (7, 12), 23.4)
    assert (f.kind, f.target, f.ranks, f.metric, f.test) == ("node", "node1", (2, 3), "egress", "probe")
    assert (f.onset, f.detected, f.after, f.own_ratio) == (7, 12, 6, 23.4)
    assert f.p == pytest.approx(detect.rank_sum_p([0.6, 0.5, 0.7], [42, 41, 44]))
    assert "the job's step 23.4x its own past" in f.note and "node1->node0 41.00 ms" in f.note
    assert detect.line(f, 3.2).startswith("# slow: node1 (ranks 2, 3) egress 82.0x since step 7 (detected 3.2 s")
    link = links.flag(table, ("link", "node1->node0", 82.0), nodes, (7, 12), 23.4)
    assert (link.kind, link.target, link.ranks, link.metric) == ("link", "link node1->node0", (2, 0), "transfer")
