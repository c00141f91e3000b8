"""Which rank diverged (suite/postmortem/divergence.py, read by suite/postmortem/hang.py), over journal fixtures: a
case's ops as the harness issues them, one rank's planted early, in the middle and late, at 2 and 3 ranks; a size, an
op and a call too many; and a rank that Gloo's abort left only its ring file (suite/common/journal_ring.py)."""

from __future__ import annotations

import pytest

from suite.postmortem import divergence, hang

from suite.common import journal_ring

CASE = "experiments/collectives/cases.py::test_collective[all_reduce-sum-float32-256B-inplace]"
PROBE, AGREE, OP = ("all_reduce", [8], "float32"), ("all_reduce", [1], "int32"), ("all_reduce", [64], "float32")
BARRIER, GATHER, WRONG = ("barrier", None, None), ("all_gather", [10], "float64"), ("all_reduce", [2], "int64")
SETUP = [("all_gather", [1], "int64"), ("all_gather", [40], "uint8")]  # the session's set-up, before the case
AFTER = [("all_gather", [1], "int64")]  # what a rank issues after the case (the session's end)


def case_ops(iters: int = 3) -> list[tuple]:
    """One case as the harness issues it: the support probe and its agreement, the check run, one warm-up call,
    a barrier before each timed call, the samples gathered, the wrong counts summed."""
    return [PROBE, AGREE, OP, OP, *[BARRIER, OP] * iters, GATHER, WRONG]


def planted(ops: list[tuple], action: str, k: int) -> list[tuple]:
    """``ops`` with the k-th call of the case's op (all_reduce, every size, from 1) planted as
    SUITE_INJECT_DIVERGE=<action>:<rank>:<k>@below plants it."""
    at = [i for i, o in enumerate(ops) if o[0] == "all_reduce"][k - 1]
    instead = {"skip": [], "extra": [ops[at], ops[at]], "size": [("all_reduce", [ops[at][1][0] + 1], ops[at][2])]}
    return ops[:at] + {**instead, "other": [("broadcast", [1], "float32")]}[action] + ops[at + 1 :]


def dumps_of(seqs: dict[int, list[tuple]]) -> dict[int, dict]:
    """Each rank's dump, its journal cut where the ranks first differ (there every rank waits)."""
    setup = [(*o, "") for o in SETUP]
    full = {r: setup + [(*o, CASE) for o in ops] + [(*o, "") for o in AFTER] for r, ops in seqs.items()}
    first = next(i for i in range(max(map(len, full.values()))) if len({repr(f[i : i + 1]) for f in full.values()}) > 1)
    out = {}
    for r, f in full.items():
        tail = [
            {"op": o, "group": "0", "seq": i + 1, "shape": sh, "dtype": dt, "peer": None, "case": c}
            | {"state": "entered" if i == first else "completed", "time_unix": 100.0 + i}
            for i, (o, sh, dt, c) in enumerate(f[: first + 1])
        ]
        ops = {}
        for e in tail:
            if e["case"]:
                ops[e["op"]] = ops.get(e["op"], 0) + 1
        frames = [[str(hang.ROOT / "suite" / "ops" / "collectives.py"), 131, "<lambda>"]]
        out[r] = {"rank": r, "host": "vm", "time_unix": 110.0, "case": CASE, "seq": {"0": first + 1}, "tail": tail}
        out[r] |= {"case_ops": ops, "threads": [{"name": "MainThread", "main": True, "frames": frames}]}
    return out


def blamed(action: str, k: int, world: int, rank: int = 1) -> dict:
    ops = case_ops()
    return hang.diagnose(dumps_of({r: planted(ops, action, k) if r == rank else ops for r in range(world)}), {}, world)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize(
    ("action", "k", "where"),
    [
        ("skip", 3, "early: the check run"),
        ("skip", 4, "early: the warm-up call"),
        ("skip", 6, "in the middle: a timed call"),
        ("skip", 7, "late: the last timed call"),
        ("skip", 8, "late: the wrong counts' sum"),
        ("size", 6, "a size mismatch"),
        ("other", 6, "another op"),
        ("extra", 6, "one call more"),
    ],
)
def test_the_rank_that_diverged_is_named(action, k, where, world):
    for rank in range(world):  # whichever rank it is
        d = blamed(action, k, world, rank)
        assert d["kind"] == "divergence", (where, d)
        assert f"; rank {rank} issued a different " in d["verdict"], (where, d["verdict"])


def test_at_three_ranks_a_call_too_many_early_is_the_odd_one_out():
    # at two, the check run issued twice reads as the other rank's skip of the warm-up call: the case has not
    # repeated its pattern yet, and the two orders are each one op away from the other
    for rank in range(3):
        assert f"; rank {rank} issued a different op there (the odd one out)" in blamed("extra", 3, 3, rank)["verdict"]


def test_a_skip_of_the_cases_first_call_at_two_ranks_cannot_be_told_and_at_three_is_the_odd_one_out():
    # the probe ([8]) skipped: the other rank pairs it with the agreement ([1]); nothing in two journals
    # tells which of the two orders is the program's
    d = blamed("skip", 1, 2)
    assert d["kind"] == "divergence" and "which diverged cannot be told" in d["verdict"], d["verdict"]
    assert "rank 0 is in all_reduce #3 [8]" in d["verdict"] and "rank 1 is in all_reduce #3 [1]" in d["verdict"]
    d = blamed("skip", 1, 3)
    assert "; rank 1 issued a different size there (the odd one out): rank 1 is in all_reduce #3 [1]" in d["verdict"]


def test_the_first_op_the_journals_differ_at_decides_not_the_rank_ahead():
    # Gloo completed rank 1's barrier against rank 0's all_reduce: rank 1 went on to the next all_reduce and
    # waits there, ahead; the divergence is at the op before, and rank 1 skipped
    ops = case_ops()
    dumps = dumps_of({0: ops, 1: planted(ops, "skip", 6)})
    seq = dumps[1]["seq"]["0"]
    dumps[1]["tail"][-1]["state"] = "completed"
    dumps[1]["tail"].append({**dumps[0]["tail"][-1], "seq": seq + 1, "state": "entered"})
    dumps[1]["seq"]["0"] = seq + 1
    d = hang.diagnose(dumps, {}, 2)
    head = f"rank 0 waits in all_reduce #{seq} [64] (case {CASE}); rank 1 issued a different op"
    assert d["verdict"].startswith(head), d["verdict"]
    assert f"rank 1 issued barrier #{seq}" in d["verdict"]


def test_p2p_ops_that_pair_at_one_sequence_number_are_no_divergence():
    a = {"op": "send", "group": "0", "seq": 5, "shape": [4], "dtype": "float32", "peer": 1, "case": CASE}
    b = {**a, "op": "recv", "peer": 0}
    states = [{"rank": r, "group": "0", "tail": [e]} for r, e in enumerate((a, b))]
    assert divergence.first_difference(states) is None
    states[1]["tail"] = [{**b, "op": "all_reduce"}]  # a collective against a p2p op is one
    assert divergence.first_difference(states)[0] == 5


ABORTED = "Fatal Python error: Aborted\n\n"
TERMINATED = ""
"""What faulthandler writes above the stacks of a rank Gloo aborted, and of one torchrun ended (SIGTERM)."""


def _left_in_rings(tmp_path, how: dict[int, str]) -> dict:
    """A size mismatch at 2 ranks (rank 1 planted) as the ranks leave it when none answers: each rank's ring file,
    and faulthandler's stack in an all_reduce under ``how[rank]``'s header; the dumps the rings were made from."""
    ops = case_ops()
    dumps = dumps_of({0: ops, 1: planted(ops, "size", 6)})
    (tmp_path / "hang").mkdir()
    for r, d in dumps.items():
        ring = journal_ring.Ring(tmp_path / "hang" / f"rank{r}.ring", "vm", 0.0)
        for e in d["tail"]:
            if e["case"] and ring.case_no < 2:
                ring.case(CASE)
            ring.put(e["op"], "0", e["seq"], e["shape"], e["dtype"], None, d["case_ops"].get(e["op"], 1), 1.0)
        (tmp_path / "hang" / f"rank{r}.fatal").write_text(
            f"{how[r]}Current thread 0x00007f02 (most recent call first):\n"
            f'  File "{hang.ROOT / "suite" / "ops" / "collectives.py"}", line 131 in <lambda>\n'
        )
    return dumps


def test_a_rank_ended_by_sigterm_before_it_answered_is_read_from_its_ring_too(tmp_path):
    """Gloo aborts rank 0 on the size mismatch, and torchrun ends rank 1 (SIGTERM) before it answers the
    diagnosis: rank 1's ring still says what it issued there, so the verdict is the divergence (9), naming rank 1,
    not a lost peer (5). Seen at 3 ranks on a loaded machine, where torchrun's SIGTERM often came first."""
    from suite.common.failures import EXIT_DIVERGED
    from suite.launch.supervise import final_status

    _left_in_rings(tmp_path, {0: ABORTED, 1: TERMINATED})
    d = hang.diagnose_run(tmp_path, 2, "test", ask=False)
    assert d["kind"] == "divergence", d
    assert "; rank 1 issued a different size there" in d["verdict"] and "rank 1 died in all_reduce #" in d["verdict"]
    assert "rank 1 was ended by a signal (SIGTERM) in <lambda>" in d["verdict"], d["verdict"]
    assert final_status(-6, None, tmp_path, {"rank": 0, "host": "vm", "exitcode": -6, "signal": "SIGABRT"}) == (
        EXIT_DIVERGED
    )


def test_ranks_ended_by_sigterm_with_no_abort_are_lost_peers_whatever_they_issued(tmp_path):
    """A SIGTERM from outside (a user's kill, a scheduler) is the first failure itself, not torchrun's cleanup
    after an abort: the ranks it ended are lost peers (5), even where their rings differ."""
    from suite.common.failures import EXIT_PEER_FAILURE
    from suite.launch.supervise import final_status

    _left_in_rings(tmp_path, {0: TERMINATED, 1: TERMINATED})
    d = hang.diagnose_run(tmp_path, 2, "test", ask=False)
    assert d["kind"] == "died" and "different" not in d["verdict"], d
    assert final_status(-15, None, tmp_path, {"rank": 1, "host": "vm", "exitcode": -15, "signal": "SIGTERM"}) == (
        EXIT_PEER_FAILURE
    )


def test_a_rank_that_gloo_aborted_is_read_from_its_ring_and_the_divergence_is_status_9(tmp_path):
    """Both ranks of a size mismatch die of SIGABRT, leaving faulthandler's stacks and their ring files: the
    diagnosis compares what they issued at that op, a divergence (9), not a lost peer (5)."""
    from suite.common.failures import EXIT_DIVERGED
    from suite.launch.supervise import final_status

    dumps = _left_in_rings(tmp_path, {0: ABORTED, 1: ABORTED})
    back = journal_ring.read(tmp_path / "hang" / "rank1.ring", 1)
    assert back["tail"][-1]["shape"] == [65] and back["tail"][-1]["state"] == "entered" and back["case"] == CASE
    assert [e["seq"] for e in back["tail"]] == [e["seq"] for e in dumps[1]["tail"]]
    d = hang.diagnose_run(tmp_path, 2, "test", ask=False)
    assert d["kind"] == "divergence", d
    assert d["verdict"].startswith("rank 0 died in all_reduce #"), d["verdict"]
    assert "; rank 1 issued a different size there" in d["verdict"] and "rank 1 died in all_reduce #" in d["verdict"]
    assert d["verdict"].endswith("rank 1 died (Aborted) in <lambda> at suite/ops/collectives.py:131 in <lambda>")
    assert final_status(-6, None, tmp_path, {"rank": 0, "host": "vm", "exitcode": -6, "signal": "SIGABRT"}) == (
        EXIT_DIVERGED
    )
