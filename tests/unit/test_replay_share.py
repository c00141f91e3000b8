"""Compute contention in the what-if (suite/postmortem/replay/share.py, wired in whatif.py and cli.py) on hand-made
timelines: 3 ranks on 2 cores, one of them asleep while the others compute. Times in milliseconds, as seconds."""

from __future__ import annotations

import json

import pytest

from suite.postmortem.replay import cli, share
from suite.postmortem.replay.graph import RankStep, build, key_ops
from suite.postmortem.replay.whatif import WhatIf, analyse, changed, idealised, median_transfers

MS = 1e-3


def rank(r: int, start: float, end: float, *ops: tuple) -> RankStep:
    """Rank ``r``'s step in ms; each op (name, start, end, (group, seq, its ranks))."""
    return RankStep(r, start * MS, end * MS, key_ops([(o[0], o[1] * MS, o[2] * MS, *o[3:]) for o in ops]))


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


def straggler_step(sleep: float = 20.0) -> list:
    """3 ranks: 10 ms of backward (rank 1 asleep ``sleep`` ms instead), an all_reduce of 2 ms once all are there,
    1 ms of optimizer."""
    arrive = max(10.0, sleep)
    return [
        rank(r, 0, arrive + 3, ("all_reduce", sleep if r == 1 else 10.0, arrive + 2, ("0", 1, (0, 1, 2))))
        for r in range(3)
    ]


def busy_of(step: list, asleep: int | None = 1) -> dict:
    """Every rank busy through its segments but ``asleep``'s first one (its sleep)."""
    out = {}
    for s in step:
        o = s.ops[0]
        out[s.rank] = ([] if s.rank == asleep else [(s.start, o.start)]) + [(o.end, s.end)]
    return out


def test_no_straggler_prices_the_others_compute_as_if_all_three_computed_at_once():
    """The old ideal took the clean ranks' 10 ms, computed with the cores to themselves: 13 ms a step. All three
    computing at once on 2 cores, the 10 ms take 15 (the optimizer, where all three computed at once, stays 1)."""
    step = straggler_step()
    plain, priced = build(step), build(step)
    assert idealised(plain, median_transfers([plain])) == pytest.approx(13 * MS)
    share.attach([priced], busy_of(step), cores=2, ranks=3)
    assert idealised(priced, median_transfers([priced])) == pytest.approx((15 + 2 + 1) * MS)
    assert analyse([priced], [])["replayed_ms"] == pytest.approx(23.0)  # the replay itself unchanged


def test_a_rank_slower_at_compute_does_its_extra_work_on_a_core_of_its_own():
    """Clean: all three compute 15 ms at once on 2 cores (10 ms of work). Rank 1 2x slower: its extra 10 ms of work
    runs while the others wait, at a full core: 25 ms, not 30."""
    step = [rank(r, 0, 18, ("all_reduce", 15, 17, ("0", 1, (0, 1, 2)))) for r in range(3)]
    g = build(step)
    assert changed(g, WhatIf("rank", (1,), 2.0), {}) == pytest.approx((30 + 2 + 2) * MS)
    share.attach([g], busy_of(step, asleep=None), cores=2, ranks=3)
    # its optimizer's 1 ms ran with all three busy (2/3 ms of work): 1 + 2/3
    assert changed(g, WhatIf("rank", (1,), 2.0), {}) == pytest.approx((25 + 2 + 1 + 2 / 3) * MS)


def test_ranks_that_do_not_outnumber_the_cores_keep_every_figure():
    step = straggler_step()
    plain, priced = build(step), build(step)
    share.attach([priced], busy_of(step), cores=3, ranks=3)
    whatifs = [WhatIf("rank", (1,), 2.0)]
    assert analyse([priced], whatifs) == analyse([plain], whatifs)


def _run(tmp_path, ranks: int, cores: int):
    share_rec = {"ranks": ranks, "usable_cpus": cores}
    rec = {"machine_info": {"suite": {"hosts": {"vm": {"cpu_share": share_rec}}}}}
    (tmp_path / "bench.json").write_text(json.dumps(rec))
    return tmp_path


def test_the_run_is_priced_with_contention_only_where_its_ranks_outnumbered_the_cores(tmp_path):
    g = build(straggler_step())
    said = cli.contend(_run(tmp_path, 3, 4), "case", [g])
    assert said.startswith("none: the ranks did not outnumber") and g.cpu == {}
    said = cli.contend(_run(tmp_path, 3, 2), "case", [g])  # oversubscribed, but no profile says when ranks were busy
    assert said.startswith("none: 3 ranks shared 2 cores") and g.cpu == {}


def test_compose_containers_share_one_machines_cores_only_when_told(tmp_path):
    """3 containers of one rank, each seeing the machine's 2 cores: per host nothing is outnumbered; as one
    machine's (``--one-machine``, the compose simulation) 3 ranks share 2 cores."""
    hosts = {f"node{i}": {"cpu_share": {"ranks": 1, "usable_cpus": 2}} for i in range(3)}
    rec = {"machine_info": {"suite": {"hosts": hosts, "hostnames": list(hosts)}}}
    (tmp_path / "bench.json").write_text(json.dumps(rec))
    g = build(straggler_step())
    assert cli.contend(tmp_path, "case", [g]).startswith("none: the ranks did not outnumber")
    assert cli.contend(tmp_path, "case", [g], one_machine=True).startswith("none: 3 ranks shared 2 cores")


@pytest.mark.parametrize("backend", ["gloo", "mpi", "nccl"])
def test_busy_intervals_are_put_on_the_timelines_clock_by_any_backends_barriers(tmp_path, backend):
    """A rank's profile runs 2 s behind the timeline's clock: its barrier ends at 1.0 s where the timeline recorded
    it at 3.0 s, so its busy op (0.5-0.6 s profiled) lands at 2.5-2.6 s, whatever backend named the barrier."""
    from suite.postmortem.replay import load

    case = "test_ddp[mlp-ddp]"
    trace = {
        "otherData": {"epoch_unix_s": 0.0},
        "traceEvents": [
            {"ph": "X", "cat": "case", "name": case, "pid": 0, "tid": 1, "ts": 0.0, "dur": 5e6},
            {"ph": "X", "cat": "op", "name": "barrier", "pid": 0, "tid": 1, "ts": 2.9e6, "dur": 0.1e6},
        ],
    }
    (tmp_path / "trace.json").write_text(json.dumps(trace))
    prof = {
        "baseTimeNanoseconds": 0,
        "traceEvents": [
            {"ph": "X", "name": f"{backend}:barrier", "ts": 0.9e6, "dur": 0.1e6, "tid": 1},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0.5e6, "dur": 0.1e6, "tid": 1},
        ],
    }
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / f"{load.profile_name(case)}.rank0.json").write_text(json.dumps(prof))
    (got,) = load.busy_intervals(tmp_path, case, [0])[0]
    assert got == pytest.approx((2.5, 2.6))
