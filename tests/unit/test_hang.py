"""The hang diagnosis (suite/postmortem/hang.py) and the after-case sequence check's verdict
(suite/harness/journal/check.py) as pure functions of synthetic per-rank dumps: which rank each kind of
divergence names."""

from __future__ import annotations

import json

from suite.postmortem import hang

from suite.common import flight_recorder, timed_start

from suite.harness import c10d, journal

import suite.harness.journal.check as journal_check

import suite.harness.journal.wrap as journal_wrap
from suite.common.failures import EXIT_DIVERGED, EXIT_PEER_FAILURE, MEANING
from suite.launch.supervise import final_status

CASE = "experiments/collectives.py::test_collective[all_reduce-sum-float32-256B-inplace]"
RUNNER = str(hang.ROOT / "suite" / "harness" / "runner.py")
OPS = str(hang.ROOT / "suite" / "ops" / "collectives.py")
TORCH = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def entry(op, seq, state="completed", shape=(64,), t=100.0, peer=None):
    return {
        "op": op,
        "group": "0",
        "seq": seq,
        "shape": list(shape) if shape else None,
        "dtype": "float32",
        "peer": peer,
        "case": CASE,
        "state": state,
        "time_unix": t,
    }


def dump(rank, seq, tail, frames, case_ops=None, t=110.0, host="vm"):
    return {
        "rank": rank,
        "host": host,
        "time_unix": t,
        "case": CASE,
        "seq": {"0": seq},
        "tail": tail,
        "case_ops": case_ops or {},
        "threads": [{"name": "MainThread", "main": True, "frames": frames}],
    }


IN_OP = [[RUNNER, 118, "run"], [OPS, 119, "<lambda>"], [TORCH, 3252, "all_reduce"]]
IN_SLEEP = [[RUNNER, 118, "run"], [RUNNER, 236, "diverge"]]


def test_a_rank_that_never_entered_the_op_is_named_with_where_it_is():
    dumps = {
        0: dump(0, 57, [entry("all_reduce", 56), entry("all_reduce", 57, "failed")], IN_OP),
        1: dump(1, 56, [entry("all_reduce", 56)], IN_SLEEP),
        2: dump(2, 57, [entry("all_reduce", 56), entry("all_reduce", 57, "entered")], IN_OP),
    }
    d = hang.diagnose(dumps, {}, 3)
    assert d["kind"] == "divergence"
    assert d["verdict"] == (
        f"ranks 0,2 wait in all_reduce #57 (case {CASE}); rank 1 never entered it: "
        "rank 1 at suite/harness/runner.py:236 in diverge"
    )
    assert any(line.startswith("rank 1 (vm): last issued all_reduce #56 (completed)") for line in d["ranks"])


def test_a_frozen_rank_is_a_lost_peer_even_when_the_others_stopped_at_different_ops():
    """Rank 3 froze (SIGSTOP: no journal, no stacks); the others stopped where it left them, at
    different ops. That is a lost peer (status 5), not a divergence (9): found under Slurm, where the
    frozen rank's node-mate had not reached the op the others wait in."""
    dumps = {
        0: dump(0, 57, [entry("all_reduce", 56), entry("all_reduce", 57, "entered")], IN_OP),
        1: dump(1, 57, [entry("all_reduce", 56), entry("all_reduce", 57, "entered")], IN_OP),
        2: dump(2, 56, [entry("all_reduce", 56, "entered")], IN_OP),
    }
    d = hang.diagnose(dumps, {}, 4)
    assert d["kind"] == "died"
    assert d["verdict"].startswith("rank 3 did not answer (frozen or gone); ")


def test_a_rank_in_a_different_op_is_named_by_its_missing_case_op():
    # rank 1 skipped an all_reduce: both are at #80, rank 1 in the next barrier, one all_reduce short
    dumps = {
        0: dump(0, 80, [entry("all_reduce", 80, "failed")], IN_OP, {"all_reduce": 40, "barrier": 39}),
        1: dump(1, 80, [entry("barrier", 80, "failed", shape=None)], IN_OP, {"all_reduce": 39, "barrier": 40}),
    }
    d = hang.diagnose(dumps, {}, 2)
    assert d["kind"] == "divergence"
    assert d["verdict"].startswith(f"rank 0 waits in all_reduce #80 [64] (case {CASE}); rank 1 issued a different op")
    assert "rank 1 is in barrier #80 at suite/ops/collectives.py:119" in d["verdict"]


def test_a_tie_of_ops_names_the_rank_whose_op_is_unusual_for_itself():
    # same op counts (the size plant): rank 0's [65] is the one its own journal never saw before
    tail0 = [entry("all_reduce", s) for s in range(70, 80)] + [entry("all_reduce", 80, "entered", shape=(65,))]
    tail1 = [entry("all_reduce", s) for s in range(70, 81)]
    tail1[-1]["state"] = "entered"
    counts = {"all_reduce": 11}
    d = hang.diagnose({0: dump(0, 80, tail0, IN_OP, counts), 1: dump(1, 80, tail1, IN_OP, counts)}, {}, 2)
    assert (
        "; rank 0 issued a different size there (ops in an order no journal held before): rank 0 is in "
        "all_reduce #80 [65]"
    ) in d["verdict"]


def test_every_rank_in_the_same_op_is_a_hang_not_a_divergence():
    dumps = {r: dump(r, 12, [entry("all_reduce", 12, "entered")], IN_OP) for r in range(2)}
    d = hang.diagnose(dumps, {}, 2)
    assert d["kind"] == "hang" and d["verdict"].startswith("every rank that answered waits in all_reduce #12")


def test_a_rank_killed_by_a_fatal_signal_is_named_with_what_the_others_waited_in():
    fatal = hang.parse_faulthandler(
        "Fatal Python error: Aborted\n\n"
        "Thread 0x00007f01 (most recent call first):\n"
        '  File "/x/threading.py", line 982 in run\n'
        '  File "/x/threading.py", line 1002 in _bootstrap\n\n'
        "Thread 0x00007f02 (most recent call first):\n"
        f'  File "{TORCH}", line 3252 in all_reduce\n'
        f'  File "{OPS}", line 119 in <lambda>\n'
        f'  File "{RUNNER}", line 118 in run\n'
    )
    assert fatal["error"] == "Aborted" and fatal["frames"][-1][2] == "all_reduce"
    dumps = {1: dump(1, 80, [entry("all_reduce", 80, "failed")], IN_OP)}
    d = hang.diagnose(dumps, {0: fatal}, 3)
    assert d["kind"] == "died"
    assert d["verdict"] == (
        "rank 0 died (Aborted) in all_reduce at suite/ops/collectives.py:119 in <lambda>; "
        "rank 2 did not answer (frozen or gone); "
        f"rank 1 waited in all_reduce #80 [64] (case {CASE})"
    )
    # the report's per-rank table (failures/hang.json): one row a rank, the dead and the silent included
    assert [(r["rank"], r["state"], r["op"], r["where"]) for r in d["table"]] == [
        (0, "died (Aborted) in all_reduce", "", "suite/ops/collectives.py:119 in <lambda>"),
        (1, "waiting", "all_reduce #80", "suite/ops/collectives.py:119 in <lambda>"),
        (2, "did not answer", "", "?"),
    ]


def test_a_rank_that_completed_the_op_is_never_said_to_wait_in_it():
    # rank 0 is past all_gather #609 (it completed), rank 1 had not reached it: nobody waits for anybody
    dumps = {
        0: dump(0, 609, [entry("all_gather", 609)], IN_SLEEP),
        1: dump(1, 608, [entry("all_gather", 608)], IN_SLEEP),
    }
    d = hang.diagnose(dumps, {}, 2)
    assert d["ranks"][0].startswith("rank 0 (vm): last issued all_gather #609 (completed)")
    assert d["kind"] == "unknown" and d["verdict"] == (
        f"no rank waits on another: rank 0 completed all_gather #609 (case {CASE}), rank 1 had not reached it"
    )
    # of the ranks at the op, only those still in it wait; the one that completed it is not named
    dumps[2] = dump(2, 609, [entry("all_gather", 609, "entered")], IN_OP)
    d = hang.diagnose(dumps, {}, 3)
    assert d["kind"] == "divergence" and d["verdict"].startswith("rank 2 waits in all_gather #609 (case ")
    assert d["verdict"].endswith("; rank 1 never entered it: rank 1 at suite/harness/runner.py:236 in diverge")


def test_the_sequence_check_names_the_odd_rank_per_group():
    def check(*counts):
        return journal_check.divergence(dict(enumerate(counts)), "c")

    assert check({"0": 40}, {"0": 40}, {"0": 40}) is None
    assert check({"0": 40}, {"0": 39}, {"0": 40}).startswith(
        "ranks diverged by the end of c: rank 1 had issued 39 collective(s) on process group 0 where rank(s) 0,2 "
        "had issued 40"
    )
    assert "rank 1 had issued 41" in check({"0": 40}, {"0": 41})  # a tie of two: the lowest rank is the reference
    # a subgroup only some ranks are in is compared among its members
    assert check({"0": 5, "1": 3}, {"0": 5, "1": 3}, {"0": 5}) is None
    assert "rank 1 had issued 2 collective(s) on process group 1" in check({"0": 5, "1": 3}, {"0": 5, "1": 2}, {"0": 5})
    # a subgroup case: only its members (global ranks 2 and 3) take part in the check
    assert "rank 3 had issued 6" in journal_check.divergence({2: {"0": 5}, 3: {"0": 6}}, "c")


def test_the_sequence_adapter_falls_back_to_none_without_the_private_api():
    assert c10d.sequence_number(object()) is None


def test_a_divergence_is_its_own_exit_status_not_a_lost_peer(tmp_path, capsys):
    assert MEANING[EXIT_DIVERGED] == "the ranks diverged"
    (tmp_path / "failures").mkdir()
    for r in range(2):
        (tmp_path / "failures" / f"rank{r}.json").write_text(
            json.dumps({"rank": r, "host": "h", "cause": "Diverged in x: ranks diverged", "kind": "divergence"})
        )
    first = {"rank": 0, "host": "h", "exitcode": 1, "signal": None}
    assert final_status(1, None, tmp_path, first) == EXIT_DIVERGED
    # a hang the diagnosis found to be a divergence (the ranks' notes say only "timed out")
    for r in range(2):
        (tmp_path / "failures" / f"rank{r}.json").write_text(
            json.dumps({"rank": r, "host": "h", "cause": "Timed out waiting", "kind": "peer_failure"})
        )
    assert final_status(1, None, tmp_path, first) == EXIT_PEER_FAILURE
    hang.write(tmp_path, {"kind": "divergence", "verdict": "rank 1 never entered it", "ranks": []}, "test")
    assert final_status(1, None, tmp_path, first) == EXIT_DIVERGED
    assert "# hang diagnosis: rank 1 never entered it" in capsys.readouterr().err


def _fr_entry(record_id, seq, state, line):
    # the fields torch's flight recorder writes for a collective (torch/distributed/flight_recorder)
    return {
        "record_id": record_id,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "is_p2p": False,
        "profiling_name": "nccl:all_reduce",
        "input_sizes": [[1024]],
        "input_dtypes": ["Float"],
        "state": state,
        "time_created_ns": 1_000_000_000 * (100 + seq),
        "frames": [  # innermost first
            {"name": "all_reduce", "filename": TORCH, "line": 3252},
            {"name": "train_step", "filename": str(hang.ROOT / "experiments" / "ddp.py"), "line": line},
            {"name": "<module>", "filename": "/usr/lib/python3.11/runpy.py", "line": 88},
        ],
    }


def test_nccl_flight_recorder_dumps_are_read_by_the_same_diagnosis(tmp_path):
    import pickle

    last = {0: (57, "scheduled"), 1: (56, "completed"), 2: (57, "started")}
    for rank, (seq, state) in last.items():
        line = 130 if rank == 1 else 123  # where each rank issued its last collective (rank 1: elsewhere)
        entries = [_fr_entry(i, i, "completed", 120) for i in range(1, seq)] + [_fr_entry(seq, seq, state, line)]
        entries.append({**_fr_entry(seq + 1, 0, "scheduled", 9), "is_p2p": True, "p2p_seq_id": 4})  # p2p: not counted
        dump = {"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": entries}
        flight_recorder.path(tmp_path, rank).parent.mkdir(exist_ok=True)
        flight_recorder.path(tmp_path, rank).write_bytes(pickle.dumps(dump))
    (tmp_path / "failures" / f"{flight_recorder.FR_PREFIX}2.tmp").write_bytes(b"half a file")  # a temp file: ignored
    d = hang.diagnose_run(tmp_path, 3, "test", ask=False)
    assert d["flight_recorder"] == (
        "ranks 0,2 wait in all_reduce #57; rank 1 never entered it: rank 1 at experiments/ddp.py:130 in train_step"
    )
    assert json.loads((tmp_path / "failures" / "hang.json").read_text())["flight_recorder"] == d["flight_recorder"]
    assert f"# flight recorder: {d['flight_recorder']}" in (tmp_path / "failures" / "hang.txt").read_text()


def test_a_run_without_a_hang_leaves_no_hang_folder_and_a_hung_one_keeps_it(tmp_path):
    (tmp_path / "hang").mkdir()
    (tmp_path / "failures").mkdir()  # made at start for NCCL's dump on a timeout (suite/harness/journal/__init__.py)
    for r in range(2):
        (tmp_path / "hang" / f"rank{r}.fatal").write_text("")
        timed_start.mark(tmp_path, r)  # the injector's marker of the rank's first timed step
    hang.tidy(tmp_path)
    assert not (tmp_path / "hang").exists() and not (tmp_path / "failures").exists()
    (tmp_path / "hang").mkdir()
    timed_start.mark(tmp_path, 0)
    (tmp_path / "hang" / "rank0.fatal").write_text("")
    (tmp_path / "hang" / "rank1.fatal").write_text("Fatal Python error: Aborted\n")
    (tmp_path / "hang" / "rank0.json").write_text("{}")
    hang.tidy(tmp_path)
    assert sorted(p.name for p in (tmp_path / "hang").iterdir()) == ["rank0.json", "rank1.fatal"]


def test_on_several_hosts_the_verdict_names_the_node():
    # compose / Slurm: ranks on two nodes; the rank that never entered the op is named with its host
    dumps = {
        0: dump(0, 57, [entry("all_reduce", 57, "failed")], IN_OP, host="node0"),
        1: dump(1, 56, [entry("all_reduce", 56)], IN_SLEEP, host="node1"),
    }
    assert (
        "rank 1 never entered it: rank 1 (host node1) at suite/harness/runner.py:236 in diverge"
        in (hang.diagnose(dumps, {}, 2)["verdict"])
    )
    for d in dumps.values():
        d["host"] = "one-host"
    assert "rank 1 never entered it: rank 1 at suite/harness/runner.py" in hang.diagnose(dumps, {}, 2)["verdict"]


def test_the_report_section_reads_the_verdict_and_the_table_beside_the_run(tmp_path):
    from suite.report.render import hang_section

    run = {"suite": {"hang_diagnosis": {"kind": "divergence", "verdict": "rank 1 never entered it"}}}
    assert hang_section({"suite": {}}, tmp_path) is None  # a run that did not hang: no section
    # a bench.json copied without its failures/: the verdict alone
    assert hang_section(run, tmp_path) == {"kind": "divergence", "verdict": "rank 1 never entered it", "rows": []}
    dumps = {
        0: dump(0, 57, [entry("all_reduce", 57, "failed")], IN_OP),
        1: dump(1, 56, [entry("all_reduce", 56)], IN_SLEEP),
    }
    hang.write(tmp_path, hang.diagnose(dumps, {}, 2), "test")
    assert hang_section(run, tmp_path)["rows"] == [
        ["0", "vm", "waiting", "all_reduce #57", CASE, "suite/ops/collectives.py:119 in <lambda>"],
        ["1", "vm", "completed", "all_reduce #56", CASE, "suite/harness/runner.py:236 in diverge"],
    ]


def test_a_recorded_failure_leaves_the_installed_journals_dump_first(tmp_path, monkeypatch):
    """The heartbeat's abort and the plugin record a failure through failures.record_failure; the rank's
    journal (found on the wrapped ops, suite/harness/journal/__init__.py current) dumps before the note is written."""
    import torch.distributed as dist

    from suite.common import failures

    failures.record_failure(str(tmp_path), 0, "before any journal")
    assert not (tmp_path / "hang").exists()
    j = journal.Journal(0, str(tmp_path))
    monkeypatch.setattr(dist, "all_reduce", journal_wrap.wrap(j, "all_reduce", dist.all_reduce))
    assert journal.current() is j
    failures.record_failure(str(tmp_path), 0, "rank 1 stopped responding")
    dump = json.loads((tmp_path / "hang" / "rank0.json").read_text())
    assert "this rank failed: rank 1 stopped responding" in json.dumps(dump)
    assert (tmp_path / "failures" / "rank0.json").exists()


def test_the_lines_docs_quote_from_a_diagnosis_are_where_the_code_is():
    # docs/failures.md "Debugging a hang" pastes real output: each `suite/x.py:N in f` it quotes must still
    # point into f (the line of the call for a lambda) - the docs drift silently when the code above moves
    import ast
    import re

    text = (hang.ROOT / "docs" / "failures.md").read_text()
    quoted = set(re.findall(r"(suite/[\w/]+\.py):(\d+) in ([<>\w]+)", text))
    assert quoted  # the section quotes a real run
    for path, line, func in sorted(quoted):
        src = (hang.ROOT / path).read_text()
        n = int(line)
        if func == "<lambda>":
            assert "lambda" in src.splitlines()[n - 1], (path, line, func)
            continue
        spans = [
            (f.lineno, f.end_lineno)
            for f in ast.walk(ast.parse(src))
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == func
        ]
        assert any(a < n <= b for a, b in spans), f"docs/failures.md quotes {path}:{line} in {func}: not in {func}"
    # the planted sleep is the line the demo's verdict names
    runner = (hang.ROOT / "suite" / "harness" / "runner.py").read_text().splitlines()
    for path, line, func in quoted:
        if func == "diverge":
            assert "time.sleep" in runner[int(line) - 1], (path, line)


def test_the_flight_recorders_last_op_of_a_group_counts_as_done_only_by_its_own_state():
    """Gloo's flight recorder leaves every entry "scheduled", and ``pg_status`` counts an op that failed (a
    timeout while the peer never came) as completed: rank 0 still held in all_reduce #26 must read as waiting
    in it, or the diagnosis says nobody waits on anybody while rank 1 sleeps before it."""
    from suite.common import flight_recorder

    def entry(seq, op, rid):
        return {
            "collective_seq_id": seq,
            "profiling_name": f"gloo:{op}",
            "process_group": ["0", ""],
            "record_id": rid,
            "state": "scheduled",
            "input_sizes": [[256]],
            "time_created_ns": rid,
        }

    rank0 = {
        "entries": [entry(25, "barrier", 1), entry(26, "all_reduce", 2)],
        "pg_status": {"0": {"last_completed_collective": 26}},
    }
    rank1 = {"entries": [entry(25, "barrier", 1)], "pg_status": {"0": {"last_completed_collective": 25}}}
    tails = [flight_recorder.as_journal(d, r)["tail"] for r, d in enumerate((rank0, rank1))]
    assert [e["state"] for e in tails[0]] == ["completed", "entered"] and tails[1][-1]["state"] == "entered"
    states = [hang.rank_state(flight_recorder.as_journal(d, r)) for r, d in enumerate((rank0, rank1))]
    assert states[0]["waiting"] and states[0]["seq"] == 26 and states[1]["seq"] == 25


def test_a_rank_waiting_in_the_mpi_groups_work_is_named_at_the_users_line():
    # BACKEND=mpi: a Work's wait polls MPI in suite/harness/mpi/group.py; the line that waits is the caller's
    frames = [
        [str(hang.ROOT / "experiments" / "p2p" / "workload.py"), 42, "exchange"],
        [str(hang.ROOT / ".venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"), 2600, "recv"],
        [str(hang.ROOT / "suite" / "harness" / "mpi" / "group.py"), 130, "wait"],
    ]
    assert hang.where(frames) == "experiments/p2p/workload.py:42 in exchange"
