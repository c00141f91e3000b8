"""The launcher's own failures (issue 27), pure logic: torchrun's traceback held back, the fault
switches checked before start, a results file that cannot be written or read named in one line."""

import json
import time

import pytest

from suite.common.failures import EXIT_FAILED, EXIT_PEER_FAILURE
from suite.common.fileio import ResultsWriteError, write_json_atomic
from suite.launch.supervise import final_status, stamp_status
from suite.launch.torchrun_output import ElasticTraceback
from suite.launch import supervise
from suite.postmortem import hang

TORCHRUN_WALL = [
    "Traceback (most recent call last):\n",
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n',
    '  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 1032, in <module>\n',
    "    main()\n",
    '  File "/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent\n',
    "    raise ChildFailedError(\n",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n",
]


def _shown(lines):
    f = ElasticTraceback()
    out = [s for line in lines for s in f.feed(line)]
    return out + f.flush(), f.held


def test_torchruns_own_traceback_is_held_back_and_the_rest_shown():
    rank = ["[rank0]: Traceback (most recent call last):\n", "[rank0]: OSError: x\n"]
    box = ["=====\n", "Root Cause (first observed failure):\n"]
    shown, held = _shown(["W warning\n", *rank, *TORCHRUN_WALL, *box])
    assert shown == ["W warning\n", *rank, *box]
    assert held == TORCHRUN_WALL
    # a rank's line printed in the middle of it is shown, and the rest is still held
    shown, held = _shown([*TORCHRUN_WALL[:3], "[rank1]: bye\n", *TORCHRUN_WALL[3:]])
    assert (shown, held) == (["[rank1]: bye\n"], TORCHRUN_WALL)


def test_torchrun_killed_while_it_prints_its_traceback_leaves_nothing_shown():
    cut = TORCHRUN_WALL[:4]  # the launcher ended torchrun after its grace period, mid-traceback
    assert _shown(cut) == ([], cut)


def test_a_traceback_that_is_not_torchruns_passes_unchanged():
    chained = [
        "Traceback (most recent call last):\n",
        '  File "x.py", line 1, in <module>\n',
        "KeyError: 'a'\n",
    ]
    crash = [
        "Traceback (most recent call last):\n",
        '  File "experiments/x.py", line 3, in <module>\n',
        "\n",
        "During handling of the above exception, another exception occurred:\n",
        "ImportError: no module named y\n",
    ]
    assert _shown([*chained, *crash]) == ([*chained, *crash], [])
    cut = crash[:2]  # the stream ended inside a rank's block: it is shown, not lost
    assert _shown(cut) == (cut, [])


def test_a_write_that_fails_names_the_file_and_leaves_the_old_one(tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(ResultsWriteError) as e:
        write_json_atomic(blocker / "run" / "bench.json", {})
    assert str(e.value).startswith(f"cannot write {blocker / 'run' / 'bench.json'}: ")
    good = tmp_path / "bench.json"
    write_json_atomic(good, {"benchmarks": [1]})
    with pytest.raises(ResultsWriteError, match=f"cannot write {good}: "):
        write_json_atomic(good, {"x": object.__new__(_Unwritable)})
    assert json.loads(good.read_text()) == {"benchmarks": [1]}


class _Unwritable:
    def __str__(self):
        raise OSError(28, "No space left on device")


def test_an_unreadable_failure_note_is_named_and_the_others_still_count(tmp_path, capsys):
    notes = tmp_path / "failures"
    notes.mkdir()
    (notes / "rank0.json").write_text('{"rank": 0, "host": "h", "cau')  # cut short
    (notes / "rank1.json").write_text(json.dumps({"rank": 1, "host": "h", "cause": "boom", "kind": "rank_error"}))
    assert final_status(1, None, tmp_path, with_cause=True) == (EXIT_FAILED, "failure on rank 1 (h): boom")
    err = capsys.readouterr().err
    assert f"# failure note {notes / 'rank0.json'} unreadable (" in err and "Traceback" not in err


def test_a_bench_json_that_is_not_json_is_named_not_stamped(tmp_path):
    (tmp_path / "bench.json").write_text('{"benchmarks": [')
    with pytest.raises(ResultsWriteError, match=f"cannot record the exit status in {tmp_path / 'bench.json'}: not"):
        stamp_status(tmp_path, 1, None, "x")
    assert (tmp_path / "bench.json").read_text() == '{"benchmarks": ['


def test_a_rank_killed_by_a_signal_is_named_even_when_its_peers_noted_the_loss(tmp_path, capsys):
    # CI, 2026-12-02: rank 1 got SIGTERM; ranks 0 and 2 wrote "connection reset" notes before torchrun
    # ended them, and the line naming rank 1 was not printed
    (tmp_path / "failures").mkdir()
    for r in (0, 2):
        (tmp_path / "failures" / f"rank{r}.json").write_text(
            json.dumps({"rank": r, "host": "h", "cause": "Connection reset by peer", "kind": "peer_failure"})
        )
    first = {"rank": 1, "host": "h", "exitcode": -15, "signal": "SIGTERM"}
    status, cause = final_status(1, None, tmp_path, first, with_cause=True)
    assert (status, cause) == (EXIT_PEER_FAILURE, "first failure: rank 1 on host h killed by SIGTERM")
    assert "# first failure: rank 1 on host h killed by SIGTERM" in capsys.readouterr().err
    # a rank that raised names itself: torchrun's root cause is not repeated over it
    (tmp_path / "failures" / "rank1.json").write_text(
        json.dumps({"rank": 1, "host": "h", "cause": "boom", "kind": "rank_error"})
    )
    assert final_status(1, None, tmp_path, first, with_cause=True) == (EXIT_FAILED, "failure on rank 1 (h): boom")


def test_a_heartbeat_verdict_is_the_cause_not_the_socket_errors_it_left(tmp_path):
    """A frozen rank: the first rank whose heartbeat check names it ends itself, and its sockets closing are what
    its other peers report ("Connection closed by peer", an address, often of the wrong rank). The verdict naming
    the lost rank is the cause, whatever rank noted it."""
    (tmp_path / "failures").mkdir()
    notes = {
        0: {"cause": "RuntimeError in c.py::t: Connection closed by peer [10.0.0.3]:4711", "kind": "peer_failure"},
        3: {"cause": "rank 4 (host node2) stopped responding", "kind": "peer_failure", "lost_ranks": [4]},
        10: {"cause": "Connection reset by peer", "kind": "peer_failure"},
    }
    for r, note in notes.items():
        write_json_atomic(tmp_path / "failures" / f"rank{r}.json", {"rank": r, "host": f"node{r // 2}", **note})
    first = {"rank": 3, "host": "node1", "exitcode": 5, "signal": None}
    cause = "failure on rank 3 (node1): rank 4 (host node2) stopped responding"
    assert final_status(1, None, tmp_path, first, with_cause=True) == (EXIT_PEER_FAILURE, cause)


def test_the_process_that_started_the_ranks_is_named_as_what_it_is(tmp_path, capsys):
    """BACKEND=mpi starts the ranks with mpiexec (srun in a Slurm allocation): the lines that name the starter say
    which, not torchrun."""
    died = final_status(-9, None, tmp_path, with_cause=True, starter="mpiexec")
    assert died == (EXIT_PEER_FAILURE, "error: mpiexec died of SIGKILL; the ranks it started were ended")
    failed = final_status(2, None, tmp_path, with_cause=True, starter="srun")
    assert failed == (EXIT_FAILED, "error: srun exited with status 2 and no rank named a cause")
    assert "torchrun" not in capsys.readouterr().err


def test_a_case_that_failed_on_every_rank_is_named_with_its_message(tmp_path, capsys):
    """A case the harness failed (CaseFailed: every rank alike, the run went on) leaves no failure note; the
    launcher said only 'first failure: rank 0 ... exited with status 1'. It now names the case and why."""
    failed = [
        {"case": "experiments/sharded/cases.py::test_sharded[ddp]", "message": "ddp: the step issued ... (dp: 2, 1)"},
        {"case": "experiments/sharded/cases.py::test_sharded[tp]", "message": "tp: ..."},
    ]
    (tmp_path / "bench.json").write_text(json.dumps({"benchmarks": [], "suite": {"failed": failed}}))
    first = {"rank": 0, "host": "h", "exitcode": 1, "signal": None}
    status, cause = final_status(1, None, tmp_path, first, with_cause=True)
    want = (
        "2 case(s) failed: experiments/sharded/cases.py::test_sharded[ddp]: ddp: the step issued ... (dp: 2, 1) "
        "(and 1 more: bench.json suite.failed)"
    )
    assert (status, cause) == (EXIT_FAILED, want)
    err = capsys.readouterr().err
    assert f"# {want}" in err and "first failure" not in err
    # with no failed case recorded, torchrun's first failed rank is still the line
    (tmp_path / "bench.json").write_text(json.dumps({"benchmarks": [], "suite": {"failed": []}}))
    assert final_status(1, None, tmp_path, first, with_cause=True) == (
        EXIT_FAILED,
        "first failure: rank 0 on host h exited with status 1",
    )


def test_the_case_selection_the_host_collects_is_pytests_last_k_and_m():
    from suite.launch.preflight import selection_args

    assert selection_args([]) == [] and selection_args(["--benchmark-sort", "mean", "-s", "-x"]) == []
    assert selection_args(["-k", "a or b", "-x"]) == ["-k", "a or b"]
    assert selection_args(["-kfoo", "-m", "not slow", "-k", "bar"]) == ["-k", "bar", "-m", "not slow"]


def _frozen_rank_2(run_dir, signalled_rank_1: bool) -> None:
    """Rank 2 of 3 frozen: rank 0 noted it lost (its heartbeat stopped) and answered the dump request; rank 1
    either ended by torchrun's SIGTERM (faulthandler's stacks) or not yet ending."""
    note = {"rank": 0, "cause": "rank 2 (host h) stopped responding", "lost_ranks": [2], "kind": "peer_failure"}
    write_json_atomic(run_dir / "failures" / "rank0.json", note)
    write_json_atomic(run_dir / "hang" / "rank0.json", {"rank": 0, "tail": [], "threads": []})
    write_json_atomic(run_dir / "hang" / "rank1.json", {"rank": 1, "tail": [], "threads": []})
    (run_dir / "hang" / "rank1.fatal").write_text("Current thread 0x1 (most recent call first):\n" * signalled_rank_1)


def test_a_rank_named_lost_is_not_waited_for_and_ended_once_every_other_rank_is_ending(tmp_path, monkeypatch, capsys):
    _frozen_rank_2(tmp_path, signalled_rank_1=False)
    monkeypatch.setattr(hang.time, "sleep", lambda s: pytest.fail("waited for a rank its peers named lost"))
    dumps, _ = hang.collect(tmp_path, 3, "a rank reported a failure", wait_s=60)
    assert sorted(dumps) == [0, 1]
    now = time.monotonic()
    assert not supervise._ended_by_lost(tmp_path, 3, now)  # rank 1 runs on: it gets the grace
    assert not supervise._ended_by_lost(tmp_path, 0, now)  # no world to account for: the grace only
    assert capsys.readouterr().err == ""
    _frozen_rank_2(tmp_path, signalled_rank_1=True)
    assert supervise._ended_by_lost(tmp_path, 3, now)
    assert "rank(s) 2 named lost, every other rank ending: ending the ranks now" in capsys.readouterr().err
    assert supervise._ended_by_lost(tmp_path, 3, now - supervise.FAILURE_GRACE_S - 1)  # the grace is over
