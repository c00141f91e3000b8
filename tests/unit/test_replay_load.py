"""The what-if replay's reader (suite/postmortem/replay/load.py) on a hand-made run folder: the timeline's step
spans per case and rank, the profile's backend ops inside them on the same Unix clock, a send and its recv named
as one op in a world of two, and the run's record of the step; and a real 3-rank pipeline's profiled run
(tests/fixtures/pp-gloo-3), its sends and recvs keyed on their group and sequence number."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from suite.postmortem.replay import graph, load

EPOCH = 1_000.0  # the timeline's ts 0, Unix seconds


def _x(cat: str, name: str, rank: int, ts_us: float, dur_us: float) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": rank + 1, "ts": ts_us, "dur": dur_us}


def write_run(tmp_path, case: str = "test_sharded[pp]", skew_us: int = 0) -> None:
    """Two ranks' timeline, profiles and record; ``skew_us``: the profiles' anchor that much late (their ops read
    that much later on Unix time than they ran), which the barrier both record (at 2-3 ms) puts right."""
    events = []
    for r in (0, 1):
        events += [_x("case", case, r, 0, 100_000), _x("op", "barrier", r, 2_000, 1_000)]
        events += [_x("sample", "step", r, 10_000, 20_000)]
        events += [_x("sample", "step", r, 40_000, 20_000), _x("phase", "timed", r, 5_000, 80_000)]
    (tmp_path / "trace.json").write_text(json.dumps({"traceEvents": events, "otherData": {"epoch_unix_s": EPOCH}}))
    base_ns = 999_000_000_000 + 1_000 * skew_us  # the profile's clock starts 1 s before the timeline's
    ops = {0: [("gloo:send", 1_012_000, 2_000), ("gloo:recv", 1_020_000, 5_000)], 1: [("gloo:recv", 1_011_000, 3_000)]}
    ops[1] += [("gloo:send", 1_021_000, 4_000), ("gloo:all_reduce", 1_045_000, 1_000), ("aten::mm", 1_046_000, 9)]
    ops[0] += [("gloo:all_reduce", 1_044_000, 2_000), ("gloo:all_reduce", 1_099_000, 1_000)]  # the last: no step
    (tmp_path / "profiles").mkdir()
    for r, mine in ops.items():
        mine = [("gloo:barrier", 1_002_000, 1_000), *mine]
        evs = [{"ph": "X", "name": n, "ts": ts, "dur": d, "pid": 1, "tid": 9} for n, ts, d in mine]
        doc = {"traceEvents": evs, "baseTimeNanoseconds": base_ns}
        (tmp_path / "profiles" / f"test_sharded_pp.rank{r}.json").write_text(json.dumps(doc))
    bench = {"benchmarks": [{"name": case, "extra_info": {"samples_us": [19_000.0, 21_000.0]}}]}
    (tmp_path / "bench.json").write_text(json.dumps(bench))


@pytest.mark.parametrize("skew_us", [0, 10_000, -7_000])
def test_steps_and_their_ops_on_one_clock(tmp_path, skew_us):
    write_run(tmp_path, skew_us=skew_us)
    spans = load.step_spans(load.read_timeline(tmp_path))
    assert list(spans) == ["test_sharded[pp]"]
    assert spans["test_sharded[pp]"][1] == [pytest.approx((1_000.01, 1_000.03)), pytest.approx((1_000.04, 1_000.06))]
    first, second = load.case_steps(tmp_path, "test_sharded[pp]", spans["test_sharded[pp]"])
    r0, r1 = first
    assert [o.key for o in r0.ops] == [("p2p 0->1", 0), ("p2p 1->0", 0)]
    assert [o.key for o in r1.ops] == [("p2p 0->1", 0), ("p2p 1->0", 0)]
    assert r0.ops[0].start == pytest.approx(1_000.012) and r0.ops[0].end == pytest.approx(1_000.014)
    assert [o.key for s in second for o in s.ops] == [("all_reduce", 0), ("all_reduce", 0)]  # aten:: is compute
    assert load.recorded_step_s(tmp_path, "test_sharded[pp]") == pytest.approx(0.020)
    assert load.recorded_step_s(tmp_path, "test_other") is None


def test_the_clock_shift_is_the_median_gap_to_the_nearest_barrier():
    assert load.clock_shift([1.0, 2.0, 3.0], [0.99, 1.99, 2.99, 2.5]) == pytest.approx(0.01)
    assert load.clock_shift([], [1.0]) == 0.0 and load.clock_shift([1.0], []) == 0.0


def test_the_clock_shift_agrees_on_the_barriers_a_cut_short_timeline_holds():
    """The compose simulation's 3-rank pp_gpipe, its middle rank: the timeline held 7 of its 20 barriers (their ends
    below, s), the profile all 20, on a clock 10 ms behind. The 13 past the timeline's last are each nearest to it by
    a different gap; the median of all 20 gaps was -0.28 s (every op of the rank put in another step)."""
    recorded = [0.0, 0.1341, 0.3019, 0.4345, 0.5596, 0.6649, 0.7748]
    later = [0.8866, 0.9998, 1.1083, 1.2112, 1.3184, 1.4272, 1.5307, 1.66, 1.7815, 1.9, 2.0066, 2.1052, 2.2]
    profiled = [t - 0.01 for t in recorded + later]
    assert load.clock_shift(recorded, profiled) == pytest.approx(0.01)
    assert load.clock_shift([1.0, 2.0], [0.5, 1.8]) == pytest.approx(0.35)  # no two agree: the median of all


def test_a_run_without_a_timeline_or_a_profile_is_refused(tmp_path):
    with pytest.raises(load.BadInput, match="has no timeline"):
        load.read_timeline(tmp_path)
    write_run(tmp_path)
    (tmp_path / "profiles" / "test_sharded_pp.rank1.json").unlink()
    spans = load.step_spans(load.read_timeline(tmp_path))["test_sharded[pp]"]
    with pytest.raises(load.BadInput, match=r"no profile of test_sharded\[pp\] on rank 1 .*PROFILE=1"):
        load.case_steps(tmp_path, "test_sharded[pp]", spans)


def _issued(*ops: tuple[str, int, float]) -> list[dict]:
    """The flight recorder's record of a rank: (group, seq, issue time in s), every op an all_reduce."""
    return [{"pg": pg, "seq": seq, "op": "all_reduce", "issued_ns": int(t * 1e9)} for pg, seq, t in ops]


GROUPS = {"1": (0, 2), "3": (0, 1)}
ISSUED = _issued(*((g, i, i + d) for i in range(1, 5) for g, d in (("3", 0.0), ("1", 0.1))))
"""Rank 0 of a 2-D mesh issues four all_reduces in each of its groups, TP group 3's first, DP group 1's next."""


def test_each_op_takes_its_group_and_sequence_number_from_its_thread():
    """TP group 3 runs on threads 31 and 32, DP group 1 on thread 11. Group 1's first op starts before group 3's,
    issued first (thread 31 was busy): its thread's other ops still place it in group 1."""
    starts = [(1.12, 11), (1.15, 31), (2.05, 31), (2.15, 11), (3.05, 31), (3.15, 11), (4.05, 32), (4.15, 11)]
    ops = [("all_reduce", a, a + 0.01, tid) for a, tid in starts]
    placed = load.assign_groups(ops, ISSUED, GROUPS)
    assert [p[:2] for p in placed] == [("1", 1), ("3", 1), ("3", 2), ("1", 2), ("3", 3), ("1", 3), ("3", 4), ("1", 4)]
    assert [p[2] for p in placed[:2]] == [(0, 2), (0, 1)]
    # a thread as often taken for one group as for another is placed in neither: the case falls back to names
    assert load.assign_groups(ops[:2] + ops[4:], ISSUED[:2] + ISSUED[4:], GROUPS) is None


def test_a_record_that_does_not_account_for_every_op_places_none():
    ops = [("all_reduce", a + 0.1, a + 0.11, 11) for a in (1.0, 2.0, 3.0)]
    assert load.assign_groups(ops, ISSUED, GROUPS) is None  # 8 issued, 3 ran
    ops += [("all_reduce", a, a + 0.01, 31) for a in (1.0, 2.0, 3.0, 4.0)] + [("all_reduce", 4.1, 4.11, 11)]
    assert load.assign_groups(ops, ISSUED, GROUPS) is not None
    assert load.assign_groups(ops, ISSUED, {"3": (0, 1)}) is None  # group 1's ranks unknown
    assert load.assign_groups([("send", 1.0, 2.0, 5)], [], GROUPS) is None


def _record_groups(tmp_path, ranks=(0, 1)) -> None:
    """write_run's ranks' flight-recorder record: the barrier and the all_reduces, in the world's group 0."""
    for r in ranks:
        ops = _issued(("0", 1, 1000.0), ("0", 2, 1000.04), *([("0", 3, 1000.09)] if r == 0 else []))
        ops[0]["op"] = "barrier"
        doc = {"ops": ops, "groups": {"0": [0, 1]}}
        (tmp_path / "profiles" / "c10d").mkdir(exist_ok=True)
        (tmp_path / "profiles" / "c10d" / f"test_sharded_pp.rank{r}.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("recorded", [(0, 1), (0,)])
def test_the_steps_ops_keyed_on_their_group_where_every_rank_recorded_it(tmp_path, recorded):
    write_run(tmp_path)
    _record_groups(tmp_path, recorded)
    spans = load.step_spans(load.read_timeline(tmp_path))["test_sharded[pp]"]
    first, second = load.case_steps(tmp_path, "test_sharded[pp]", spans)
    assert [o.key for o in first[0].ops] == [("p2p 0->1", 0), ("p2p 1->0", 0)]  # p2p: their own counter
    if recorded == (0, 1):
        assert [(o.key, o.group) for s in second for o in s.ops] == [(("all_reduce", 0, "pg 0"), (0, 1))] * 2
    else:  # rank 1's record missing: no rank's ops grouped (they would not match)
        assert [(o.key, o.group) for s in second for o in s.ops] == [(("all_reduce", 0), None)] * 2


PIPELINE = Path(__file__).resolve().parents[1] / "fixtures" / "pp-gloo-3"
"""A real profiled run of pp_gpipe on 3 Gloo ranks (4 micro-batches, 3 timed steps), trimmed to what the replay
reads: tests/fixtures/README.md says how it was made."""
PP = "test_sharded[pp_gpipe]"


def _pipeline_steps(run: Path = PIPELINE) -> list[list]:
    return load.case_steps(run, PP, load.step_spans(load.read_timeline(run))[PP])


def test_a_pipelines_sends_and_recvs_are_keyed_on_their_group_and_sequence_number():
    """Each send and its recv are one op, ``p2p <sender>-><receiver>`` of the world's group 0, its peers the two
    ranks, the i-th of that direction on the sender matched with the i-th on the receiver (a world of three: by
    name, a send of rank 0 would be matched with one of rank 1). Every step rebuilds and replays as recorded."""
    steps = _pipeline_steps()
    assert len(steps) == 3
    for step in steps:
        ops = {s.rank: [o for o in s.ops if o.key[0].startswith("p2p ")] for s in step}
        seen = {r: sorted({o.key[0] for o in mine}) for r, mine in ops.items()}
        assert seen == {0: ["p2p 0->1", "p2p 1->0"], 1: ["p2p 0->1", "p2p 1->0", "p2p 1->2", "p2p 2->1"]} | {
            2: ["p2p 1->2", "p2p 2->1"]
        }
        for r, mine in ops.items():  # 4 micro-batches: an activation forward and a gradient back per boundary
            assert sorted(o.key for o in mine if o.key[0] == "p2p 1->2") == [
                ("p2p 1->2", i, "pg 0") for i in range(4)
            ] * (r > 0)
            assert all(o.group == tuple(sorted(int(x) for x in o.key[0][4:].split("->"))) for o in mine)
        g = graph.build(step)
        assert g.matched_on == graph.BY_GROUP and g.peers[("p2p 2->1", 3, "pg 0")] == [1, 2]
        assert graph.replay(g).time == pytest.approx(g.measured, rel=0.01)  # the replay bar: 5%


def test_the_sends_and_recvs_take_the_sequence_numbers_the_flight_recorder_skips():
    """Gloo's recorder keeps no entry of a send or recv (torch 2.13), but its entries' ``op_id`` counts them: on
    every rank the collectives' op ids and the recorded sends' and recvs' sequence numbers are one run 5, 6, ...
    with no number twice (the first four: the run's set-up before the case)."""
    for r in range(3):
        issued, calls, groups = load.read_c10d_ops(
            PIPELINE / "profiles" / "c10d" / f"test_sharded_pp_gpipe.rank{r}.json"
        )
        assert groups == {"0": (0, 1, 2)} and calls and issued
        seqs = sorted([e["op_id"] for e in issued] + [c["seq"] for c in calls])
        assert seqs == list(range(5, 5 + len(seqs))), r


def test_a_record_that_misses_a_send_keys_the_pipelines_p2p_ops_on_names(tmp_path):
    """Rank 1's record one send short: no rank's sends and recvs are placed (they would not match), and in a world
    of three they are matched on their names and order, as before the record: the steps do not rebuild."""
    run = tmp_path / "run"
    shutil.copytree(PIPELINE, run)
    path = run / "profiles" / "c10d" / "test_sharded_pp_gpipe.rank1.json"
    doc = json.loads(path.read_text())
    doc["sends"] = doc["sends"][:-1]
    path.write_text(json.dumps(doc))
    step = _pipeline_steps(run)[0]
    assert {o.key[0] for s in step for o in s.ops} == {"send", "recv"} and all(
        o.group is None for s in step for o in s.ops
    )
    ops = [("send", 1.0, 1.1, 1), ("recv", 1.2, 1.3, 1), ("all_reduce", 1.4, 1.5, 7)]
    calls = [
        {"pg": "0", "seq": 3, "op": "send", "src": 0, "dst": 2},
        {"pg": "0", "seq": 4, "op": "recv", "src": 2, "dst": 0},
    ]
    assert load.assign_p2p(ops, calls) == [("p2p 0->2", ("0", 3, (0, 2))), ("p2p 2->0", ("0", 4, (2, 0))), None]
    assert load.assign_p2p(ops, calls[::-1]) is None  # a recv where the rank sent


def test_a_send_the_clocks_put_just_past_its_rank_s_step_stays_in_that_step(tmp_path):
    """A rank's last send is issued microseconds before its step ends; the profile's clock, put onto the
    timeline's by the barriers, can place it just past the end. Its recv is inside the step on the other rank,
    so the send is taken as the step's too, and the step still rebuilds (by its span alone it would not: the
    recv would be an op without its send)."""
    run = tmp_path / "run"
    shutil.copytree(PIPELINE, run)
    last = _pipeline_steps()[0][1].ops[-1]  # rank 1's last op of the first step
    assert last.key[0] == "p2p 1->0"
    doc = json.loads((run / "trace.json").read_text())
    first = min((e for e in doc["traceEvents"] if e["cat"] == "sample" and e["tid"] == 2), key=lambda e: e["ts"])
    first["dur"] = (last.start - doc["otherData"]["epoch_unix_s"]) * 1e6 - first["ts"] - 5  # ends 5 µs before it
    (run / "trace.json").write_text(json.dumps(doc))
    step = _pipeline_steps(run)[0]
    assert step[1].end < last.start and last.key in [o.key for o in step[1].ops]
    g = graph.build(step)
    assert g.peers[last.key] == [0, 1] and g.matched_on == graph.BY_GROUP


def test_a_collective_one_rank_s_clock_puts_inside_the_last_step_stays_out_of_it(tmp_path):
    """The first collective after the timed steps (an all_gather of the check), which rank 0's clock puts 5 us before
    its last step's end: on the group's other two ranks it is after the step, so it is not the step's on any rank,
    and the step rebuilds (by its span alone rank 0 would have an all_reduce the others lack: the step skipped)."""
    run = tmp_path / "run"
    shutil.copytree(PIPELINE, run)
    doc = json.loads((run / "trace.json").read_text())
    epoch = doc["otherData"]["epoch_unix_s"]
    last = max((e for e in doc["traceEvents"] if e["cat"] == "sample" and e["tid"] == 1), key=lambda e: e["ts"])
    end = epoch + (last["ts"] + last["dur"]) / 1e6
    mine, _ = load.profile_events(run / "profiles" / "test_sharded_pp_gpipe.rank0.json")
    shift = load.clock_shift(
        load._timeline_barriers(run / "trace.json")[PP, 0], [o[2] for o in mine if o[0] == "barrier"]
    )
    name, start = min(((o[0], o[1] + shift) for o in mine if o[1] + shift >= end), key=lambda o: o[1])
    assert name in ("all_gather", "all_reduce", "broadcast", "barrier"), name
    last["dur"] = (start - epoch) * 1e6 - last["ts"] + 5  # rank 0's last step now ends 5 us after it starts
    (run / "trace.json").write_text(json.dumps(doc))
    *_, step = _pipeline_steps(run)
    assert step[0].start < start < step[0].end
    assert all(o.key[0].startswith("p2p ") for s in step for o in s.ops), [o.key for o in step[0].ops]
    assert graph.build(step).matched_on == graph.BY_GROUP
