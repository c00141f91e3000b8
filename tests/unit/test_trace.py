"""The run's timeline (suite/harness/journal/timeline.py, suite/postmortem/trace.py) on a one-rank Gloo group in this
process: what the journal records for it, the bound on what a rank keeps and how the trace says what it
dropped, and how the merge keeps every track nested."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from suite.harness import journal
from suite.harness.journal import timeline

import suite.harness.journal.wrap as journal_wrap
from suite.harness.runner import Harness
from suite.postmortem import trace
from suite.common.config import BenchConfig
from suite.ops import sweep
from suite.ops.collectives import FUNCTION_OF
from tests.trace_checks import check_trace, load_trace, ops
from tests.helpers.inprocess import lone_group

CFG = BenchConfig(iters=3, warmup_iters=1, min_bytes=64, max_bytes=64, heartbeat_timeout_s=0)


@pytest.fixture(scope="module")
def ctx():
    with lone_group(CFG) as c:
        yield c


def _journal_every_op(monkeypatch, j) -> None:
    """``j`` on every torch.distributed op, as journal.install leaves them (undone after the test)."""
    for op in journal_wrap.OPS:
        if hasattr(dist, op):
            monkeypatch.setattr(dist, op, journal_wrap.wrap(j, op, getattr(dist, op)))


@pytest.mark.parametrize("variant", ["all_gather_into_tensor", "reduce_scatter_tensor"])
def test_the_journal_sees_the_tensor_forms_the_collectives_call(ctx, monkeypatch, variant):
    # torch 2.13's all_gather_single / reduce_scatter_single, called by the harness's cases: journaled like the
    # others (the hang diagnosis and the trace see them), also though the journal is installed after import
    j = journal.Journal(0, None)
    _journal_every_op(monkeypatch, j)
    case = next(c for c in sweep.collective_cases(CFG, 1, experiment="collectives") if c.identity["variant"] == variant)
    j.set_case(case.label)
    Harness(ctx, CFG, env={}).run(case)
    # the check run, the warm-up and the timed samples: 1 + 1 + 3 calls
    assert j.case_ops.get(FUNCTION_OF[variant], 0) >= 5, j.case_ops


def test_a_group_without_sequence_numbers_is_journaled_by_the_journals_count(ctx, monkeypatch):
    # torch's fake process group (the sharded step's compute alone runs on one) keeps no sequence number: its
    # ops are journaled all the same, counted by the journal, never failing the op
    from experiments.sharded.internals import fake_backend

    j = journal.Journal(0, None)
    _journal_every_op(monkeypatch, j)
    fake = dist.new_group(backend=fake_backend())
    out = torch.zeros(2)
    dist.all_gather_single(out, torch.ones(1), group=fake)
    dist.all_reduce(out, group=fake)
    name = next(n for n, g in j.groups.items() if g is fake)
    assert j.count[name] == 2 and [e[2] for e in j.entries] == [None, None]


def test_a_rank_keeps_a_bounded_timeline_and_the_trace_says_what_it_dropped(ctx, monkeypatch, tmp_path):
    monkeypatch.setattr(timeline, "OPS_PER_CASE", 3)
    monkeypatch.setattr(timeline, "OPS_MAX", 5)
    monkeypatch.setattr(timeline, "SPANS_MAX", 2)
    monkeypatch.setattr(journal, "TAIL", 2)
    j = journal.Journal(0, str(tmp_path))
    _journal_every_op(monkeypatch, j)
    t = torch.ones(4)
    for case in ("a[x]", "b[y]", "c[z]"):
        j.set_case(case)
        for _ in range(4):
            dist.all_reduce(t)
        j.timeline.span("case", case, j.ops[-1][8], j.ops[-1][9])
    # a: its first 3 ops (1 dropped); b: 2 more up to the 5 in all (2 dropped); c: none (4 dropped), but the
    # journal's ring (its last 2 ops) is always kept: 2 of c's are back
    assert j.timeline.write_part("end of session") == tmp_path / "trace" / "rank0.json"
    doc = trace.build(*trace.read_parts(tmp_path))
    by_rank = check_trace(doc)
    seen = ops(by_rank[0])
    first = seen[0]["args"]["seq"]  # the group's count goes on from the module's earlier tests
    kept = [(e["args"]["case"], e["args"]["seq"] - first + 1) for e in seen]
    assert kept == [("x", 1), ("x", 2), ("x", 3), ("y", 5), ("y", 6), ("z", 11), ("z", 12)]
    other = doc["otherData"]
    assert "at most 3 ops per case" in other["bound"] and "5 per rank" in other["bound"]
    assert other["dropped"] == (
        "events past the bound were dropped: rank 0: 5 ops (in 3 cases, each marked by an instant 'ops dropped'), "
        "1 span(s)"
    )
    marks = [e for e in by_rank[0] if e["ph"] == "i"]
    assert [(m["args"]["case"], m["args"]["dropped_ops"]) for m in marks] == [("x", 1), ("y", 2)]  # c kept none
    # each mark follows the last op kept of its case
    assert marks[0]["ts"] == pytest.approx(seen[2]["ts"] + seen[2]["dur"], abs=0.002)
    assert [e["name"] for e in by_rank[0] if e.get("cat") == "case"] == ["a[x]", "b[y]"]  # SPANS_MAX = 2


def test_the_merge_keeps_each_track_nested_and_moves_what_overlaps_partially():
    # an op of another thread (or a span cut by rounding) would overlap an open event partially: one
    # track cannot show it nested, so it goes to the rank's second track
    part = _part(
        0,
        None,
        ops=[
            ["all_reduce", "0", 1, [4], "float32", None, "e[c]", "completed", 1.0, 2.0, 16],
            ["all_reduce", "0", 2, [4], "float32", None, "e[c]", "completed", 2.5, 4.5, 16],  # crosses the phase end
            ["recv", "0", 3, [1], "float32", 1, "e[c]", "entered", 5.0, None, 4],  # waiting when written
        ],
        spans=[["phase", "timed", 0.5, 3.0, None], ["case", "e[c]", 0.0, 4.0000000001, {"case": "e[c]"}]],
    )
    doc = trace.build({0: part}, {})
    by_rank = check_trace(doc)
    assert [e["args"]["seq"] for e in ops(by_rank[0])] == [1, 3]
    assert ops(by_rank[0])[-1]["dur"] == pytest.approx(5e6)  # to when the rank last wrote
    assert "still in the op" in ops(by_rank[0])[-1]["args"]["state"]
    moved = [e for e in doc["traceEvents"] if e["tid"] == trace.OVERLAP_TID + 1 and e["ph"] == "X"]
    assert [e["args"]["seq"] for e in moved] == [2]
    assert doc["otherData"]["epoch_unix_s"] == 1000.0


def test_a_span_that_starts_where_the_last_ended_stays_on_the_track_despite_rounding():
    # the journal's per-sample ops: a barrier ends at its sample's start, the op spans the sample; ts and dur are
    # rounded to the ns apart, so the barrier's rounded end can lie a hair past the sample's start
    t0 = 2.0000000012  # the barrier's end and the sample's start, seconds on the rank's clock
    part = _part(
        0,
        None,
        ops=[
            ["barrier", "0", 1, [], "", None, "e[c]", "completed", 1.0000000006, t0, 0],
            ["all_reduce", "0", 2, [4], "float32", None, "e[c]", "completed", t0, 2.5, 16],
        ],
        spans=[["sample", "sample", t0, 2.5, None], ["case", "e[c]", 0.0, 4.0, {"case": "e[c]"}]],
    )
    doc = trace.build({0: part}, {})
    by_rank = check_trace(doc)
    assert [e["args"]["seq"] for e in ops(by_rank[0])] == [1, 2]
    assert [e["name"] for e in by_rank[0] if e.get("cat") == "sample"] == ["sample"]
    assert not [e for e in doc["traceEvents"] if e["tid"] == trace.OVERLAP_TID + 1 and e["ph"] == "X"]


def test_a_rank_that_left_only_its_journal_dump_still_has_its_last_ops(tmp_path):
    dump = {
        "rank": 1,
        "host": "h",
        "reason": "requested by the launcher",
        "time_unix": 1010.0,
        "unix_minus_clock": 1000.0,
        "tail": [
            {"op": "barrier", "group": "0", "seq": 7, "shape": None, "dtype": None, "peer": None, "case": "e[c]"}
            | {"state": "completed", "clock": 2.0, "end_clock": 3.0, "bytes": None, "time_unix": 1002.0},
        ],
    }
    doc = trace.build({}, {1: dump})
    by_rank = check_trace(doc)
    assert [e["args"]["seq"] for e in ops(by_rank[1])] == [7]
    assert "rank(s) 1 left no timeline part" in doc["otherData"]["missing_ranks"]
    (tmp_path / "hang").mkdir()
    (tmp_path / "hang" / "rank1.json").write_text(__import__("json").dumps(dump))
    assert load_trace(trace.write_trace(tmp_path)) == doc


def test_ranks_that_left_only_their_ring_files_still_have_a_trace_ending_in_their_last_op(tmp_path):
    """Gloo aborts one rank and torchrun ends the others while they write their notes: no timeline part, no journal
    dump, only the rings. The trace still has each rank's ops, the last one still waiting (entered)."""
    from suite.common import journal_ring

    (tmp_path / "hang").mkdir()
    for r in (0, 1):
        ring = journal_ring.Ring(tmp_path / "hang" / f"rank{r}.ring", "vm", 1000.0)
        ring.case("e[c]")
        ring.put("barrier", "0", 7, None, None, None, 1, 2.0)
        ring.put("all_reduce", "0", 8, (256 + r,), "float32", None, 1, 3.0 + r)
    path = trace.write_trace(tmp_path)
    assert path is not None, "no trace from the rings"
    by_rank = check_trace(load_trace(path))
    for r in (0, 1):
        seen = ops(by_rank[r])
        assert [(e["args"]["op"], e["args"]["seq"]) for e in seen] == [("barrier", 7), ("all_reduce", 8)]
        assert seen[-1]["args"]["bytes"] == 4 * (256 + r) and seen[-1]["args"]["state"].startswith("entered")


def _part(rank: int, world: int | None, ops: list | None = None, spans: list | None = None) -> dict:
    """A rank's timeline part as the rank writes it: one all_reduce in one case unless ``ops``/``spans`` say."""
    one = [["all_reduce", "0", 1, [4], "float32", None, "e[c]", "completed", 1.0 + rank, 2.0 + rank, 16]]
    return {
        "rank": rank,
        "host": "h",
        "world_size": world,
        "reason": "end of session",
        "unix_minus_clock": 1000.0,
        "written_clock": 10.0,
        "op_fields": list(timeline.OP_FIELDS),
        "ops": one if ops is None else ops,
        "spans": [["case", "e[c]", 0.0, 4.0, {"case": "e[c]"}]] if spans is None else spans,
    }


def test_the_run_keeps_one_copy_of_its_timeline(tmp_path):
    """Once trace.json holds every rank's part the parts are removed, and a later merge (another node's launcher,
    python -m suite.postmortem.trace) keeps that trace; a world not all there keeps its parts for a later merge."""
    import json

    (tmp_path / "trace").mkdir()
    (tmp_path / "trace" / "rank0.json").write_text(json.dumps(_part(0, 2)))
    path = trace.write_trace(tmp_path)
    assert sorted(p.name for p in (tmp_path / "trace").iterdir()) == ["rank0.json"]  # rank 1 may still write
    (tmp_path / "trace" / "rank1.json").write_text(json.dumps(_part(1, 2)))
    assert trace.write_trace(tmp_path) == path and not (tmp_path / "trace").exists()
    whole = path.read_text()
    assert sorted(check_trace(json.loads(whole))) == [0, 1]
    assert trace.write_trace(tmp_path) == path and path.read_text() == whole  # no part left: the trace stays
    assert trace.main([str(tmp_path)]) == 0 and path.read_text() == whole
