"""Supervision of a running job: torchrun in its own session, signals forwarded, the whole
process tree killed when a rank has failed and the rest do not stop in time, and the ranks'
outcome mapped to the documented exit status (suite.common.failures)."""

from __future__ import annotations

import collections
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from suite.common.failures import (
    EXIT_DIVERGED,
    EXIT_FAILED,
    EXIT_IO,
    EXIT_NOTHING_SELECTED,
    EXIT_OK,
    EXIT_PEER_FAILURE,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_WRONG_RESULT,
    cause_note,
)
from suite.inject import launcher as inject
from suite.postmortem import hang
from suite.launch.torchrun_output import ElasticTraceback, root_cause
from suite.launch.warm import TORCHRUN_POPEN
from suite.common.fileio import ResultsWriteError, write_error, write_json_atomic
from suite.common import failures, progress, rank_exits
from suite.common.progress import ERASE_LINE


def _descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (psutil; torchrun starts each worker in a session of its
    own, so killing torchrun's process group does not reach them)."""
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:  # gone already
        return []


def _kill_tree(proc: subprocess.Popen) -> None:
    for pid in [proc.pid, *_descendants(proc.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _children(pid: int) -> set:
    """The live descendants of ``pid`` as psutil processes (which know their start time, so a
    recycled pid is never mistaken for one of them)."""
    try:
        return set(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return set()


def _kill_all(procs) -> None:
    for p in procs:
        try:
            if p.is_running():
                p.kill()
        except psutil.Error:
            pass


def run_ranks(
    cmd: list[str], env: dict, run_dir: Path, cwd: Path, erase_line=False, world_size=0, warm=None
) -> tuple[int, int | None, dict | None]:
    """Run torchrun in its own session; forward SIGINT/SIGTERM; never leave it behind. Returns its exit status,
    the signal forwarded (None) and, when it failed, the rank that failed first (None when none is named).

    torchrun's stderr passes through a thread that keeps its tail, so the launcher can name the rank torchrun
    saw fail first (ranks mpiexec or srun started name themselves: suite/common/rank_exits.py). ``erase_line``:
    each line first erases the terminal's current line (rank 0's live progress line, drawn again below it),
    instead of being appended to it. ``world_size``: the ranks asked for a hang diagnosis (suite/postmortem/hang.py)
    when one fails, before anything is ended (0: none). An interrupt is no hang: it is forwarded at once, and the
    ranks asked for nothing. ``warm``: a WarmTorchrun, torchrun already started and waiting for ``cmd``
    (suite/launch/warm.py), started the same way. INJECT's controller runs beside torchrun (suite/inject/)."""
    controller = inject.begin(env, run_dir, world_size)  # INJECT's plan: its knobs kept from the ranks
    proc = warm.go(cmd, env, cwd) if warm is not None else subprocess.Popen(cmd, cwd=cwd, env=env, **TORCHRUN_POPEN)
    tail: collections.deque = collections.deque(maxlen=400)
    elastic = ElasticTraceback()
    reader = _pass_stderr(proc, tail, elastic, erase_line)
    received: list[int] = []
    grace_ends: list[float] = []  # when torchrun's time to stop its workers after the first signal ends

    def forward(signum, _frame):
        elastic.interrupted = True
        received.append(signum)
        grace_ends[:] = grace_ends or [time.monotonic() + GRACE_S]
        try:
            proc.send_signal(signum)  # torchrun stops its workers on SIGINT/SIGTERM
        except ProcessLookupError:
            pass

    ended: list = []  # the first rank that ended on its own, read before the launcher ends anything

    def end_tree():
        ended[:] = ended or [rank_exits.first(run_dir)]
        _kill_tree(proc)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    failures_dir = run_dir / "failures"
    failed_since = None
    diagnosed = False
    started: set = set()  # every process torchrun started: they outlive it when it is killed
    try:
        while True:
            try:
                rc = proc.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            started |= _children(proc.pid)
            controller.poll(proc.pid)  # started beside torchrun at the first poll
            if received:
                if time.monotonic() > grace_ends[0]:  # torchrun did not finish within the grace: end the whole tree
                    end_tree()
                continue
            if failed_since is None and (failed := _failed(proc, run_dir)):
                if failed == "reported" and world_size:
                    _diagnose(run_dir, world_size, "a rank reported a failure")
                    diagnosed = True
                failed_since = time.monotonic()
            if failed_since is not None and not ended and _ended_by_lost(run_dir, world_size, failed_since):
                # A rank reported a fatal failure, but torchrun is still waiting on a rank
                # that ignores SIGTERM (a frozen one): do not wait for its 30 s grace.
                end_tree()
        ended[:] = ended or [rank_exits.first(run_dir)]
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        controller.end()  # the injection reverted, no rank left stopped
        # workers that outlived torchrun (a frozen one; all of them when torchrun itself was killed)
        _kill_all(started | _children(proc.pid))
        reader.join(timeout=5)
    if elastic.held and not received:  # on Ctrl-C it is torchrun's own answer to the signal: no failure
        _save_log(failures_dir / "torchrun.log", elastic.held)
    if rc != 0 and not diagnosed and world_size and not received:
        # A rank died (SIGABRT): read what it left. Or a rank reported a failure and torchrun ended before
        # the loop above looked: ranks on other nodes may still be alive, so ask them where they are.
        reported = failures_dir.is_dir() and any(failures_dir.glob("rank*.json"))
        _diagnose(run_dir, world_size, f"the ranks ended with status {rc}", ask=reported)
    hang.tidy(run_dir)
    return rc, (received[0] if received else None), (root_cause(list(tail)) or ended[0]) if rc != 0 else None


def _failed(proc, run_dir: Path) -> str | None:
    """How a rank failed, seen while the ranks run: ``reported`` (it left a note in ``failures/``), ``ended`` (a
    rank mpiexec or srun started ended on its own, other than with status 0: torchrun then stops the others at
    once, so the launcher stops them here, through mpiexec, which passes SIGTERM on to every rank), else None."""
    failures_dir = run_dir / "failures"
    if failures_dir.is_dir() and any(failures_dir.iterdir()):
        return "reported"
    if rank_exits.any_ended(run_dir):
        proc.send_signal(signal.SIGTERM)
        return "ended"
    return None


def _ended_by_lost(run_dir: Path, world_size: int, failed_since: float) -> bool:
    """Whether to end the ranks left, once a rank reported a failure: after FAILURE_GRACE_S, or at once when every
    rank is ending (it left a note, or a signal ended it: faulthandler's stacks in ``hang/rank<r>.fatal``) or is
    named lost in a note (frozen, partitioned or dead: it will not end on its own, nor answer), and says so.
    ``world_size`` 0 (no diagnosis asked of the ranks): the grace only."""
    if time.monotonic() - failed_since > FAILURE_GRACE_S:
        return True
    reported, lost = failures.reported_and_lost(run_dir) if world_size else (set(), set())
    signalled = set()
    for p in (run_dir / "hang").glob("rank*.fatal"):
        try:
            signalled |= {int(p.stem.removeprefix("rank"))} if p.stat().st_size else set()
        except (OSError, ValueError):
            continue
    if not lost or not reported | signalled | lost >= set(range(world_size)):
        return False
    if ranks := ", ".join(str(r) for r in sorted(lost - reported - signalled)):
        print(
            f"\n# rank(s) {ranks} named lost, every other rank ending: ending the ranks now, not after the grace",
            file=sys.stderr,
            flush=True,
        )
    return True


def _pass_stderr(proc, tail: collections.deque, elastic: ElasticTraceback, erase_line: bool) -> threading.Thread:
    """A started thread that passes torchrun's stderr through ``elastic`` (which holds back its tracebacks) to
    ours, each line first erasing the terminal's current line with ``erase_line``, keeping the last in ``tail``."""

    def show(lines):
        for line in lines:
            sys.stderr.write(ERASE_LINE + line if erase_line else line)
        sys.stderr.flush()

    def pump():
        for line in proc.stderr:
            tail.append(line)
            show(elastic.feed(line))
        show(elastic.flush())

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    return reader


def _save_log(path: Path, lines: list[str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.writelines(lines)
    except OSError:
        pass  # a log of torchrun's own frames: nothing the verdict needs


def _diagnose(run_dir: Path, world_size: int, why: str, ask: bool = True) -> None:
    """Ask the ranks where they are and print the diagnosis (never raises: the run must still end)."""
    try:
        diag = hang.diagnose_run(run_dir, world_size, why, ask=ask)
    except Exception as e:  # noqa: BLE001 - a broken diagnosis must not keep the ranks running
        print(f"# hang diagnosis failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return
    if diag is not None:  # on a line of its own (rank 0's progress dots may not have ended theirs)
        print("\n" + hang.render(diag), file=sys.stderr, flush=True)


GRACE_S = 20.0
"""How long torchrun gets to stop its workers after SIGINT/SIGTERM before they are killed."""
POLL_S = 0.1
"""How often the launcher looks for a rank's failure note while torchrun runs: it must ask the other ranks
where they are before torchrun, seeing the failed rank exit, ends them (that takes well under a second)."""
FAILURE_GRACE_S = 5.0
"""How long ranks get to exit on their own after one reported a fatal failure."""


def final_status(
    rc: int, signum: int | None, run_dir: Path, first: dict | None = None, with_cause: bool = False, starter="torchrun"
):
    """Map the ranks' outcome to the documented exit status, printing the cause; with ``with_cause``,
    (status, the line naming the cause or None) for bench.json's ``suite.cause``. ``rc`` is the exit status of
    ``starter``, the process that started the ranks (torchrun; mpiexec or srun for BACKEND=mpi); ``first`` the
    rank that failed first (root_cause, or suite/common/rank_exits.py ``first`` for ranks MPI started)."""
    status, cause = _verdict(rc, signum, run_dir, first, starter)
    return (status, cause) if with_cause else status


def _say(line: str) -> str:
    print(f"# {line}", file=sys.stderr)
    return line


def _verdict(rc: int, signum: int | None, run_dir: Path, first: dict | None, starter: str) -> tuple[int, str | None]:
    case = progress.take_case(run_dir)
    if signum is not None:  # the ranks' notes of peers lost as they stopped are its consequence, not a cause
        return (EXIT_SIGINT if signum == signal.SIGINT else EXIT_SIGTERM), _say(_interrupted(signum, run_dir, case))
    failures, causes = [], []
    for f in sorted((run_dir / "failures").glob("rank*.json")):
        try:
            failures.append(json.loads(f.read_text()))
        except (OSError, ValueError) as e:  # a note cut short: say so, the others still count
            _say(f"failure note {f} unreadable ({getattr(e, 'strerror', None) or e}): that rank's cause is lost")
    for fl in failures:
        causes.append(_say(f"failure on rank {fl.get('rank')} ({fl.get('host')}): {fl.get('cause')}"))
    root = cause_note(failures)  # a rank's own failure before the others' loss of it, a heartbeat verdict first
    cause = causes[failures.index(root)] if root is not None else None
    if first is not None and not failures and first["exitcode"] == EXIT_NOTHING_SELECTED:
        return EXIT_NOTHING_SELECTED, _say("nothing measured: the case selection (K= / -k) matched no case")
    failed = _failed_cases(run_dir)
    if first is not None and _unexplained(first, failures) and not (failed and first["exitcode"] > 0):
        how = f"killed by {first['signal']}" if first["exitcode"] < 0 else f"exited with status {first['exitcode']}"
        cause = _say(f"first failure: rank {first['rank']} on host {first['host']} {how}")
    diag = hang.read_verdict(run_dir)
    if diag is not None:
        _say(f"hang diagnosis: {diag['verdict']} ({run_dir / 'failures' / 'hang.txt'})")
    io = [fl for fl in failures if fl.get("kind") == "io_error"]
    if io or (first is not None and first["exitcode"] == EXIT_IO):
        # a rank could not write its results: the others' lost peer (and where they wait) is its consequence
        return EXIT_IO, f"failure on rank {io[0].get('rank')}: {io[0].get('cause')}" if io else cause
    if any(fl.get("kind") == "divergence" for fl in failures):
        return EXIT_DIVERGED, cause  # the sequence check: the ranks issued different collectives
    if any(fl.get("kind") == "rank_error" for fl in failures):
        return EXIT_FAILED, cause  # a rank raised; the others' lost-peer errors (and where they wait) follow
    if (diag or {}).get("kind") == "divergence":
        return EXIT_DIVERGED, diag["verdict"]  # alive ranks at different ops: not a lost peer
    if any(fl.get("kind") == "peer_failure" for fl in failures):
        return EXIT_PEER_FAILURE, cause
    if first is not None and first["exitcode"] < 0:
        return EXIT_PEER_FAILURE, cause  # a rank was killed or died of a signal: the others lost a peer
    if rc < 0:  # torchrun (mpiexec) itself died of a signal (the OOM killer, a kill -9): its ranks went with it
        died = f"error: {starter} died of {rank_exits.signal_name(-rc)}; the ranks it started were ended"
        return EXIT_PEER_FAILURE, _say(died)
    wrong = _wrong_cases(run_dir)
    if wrong:
        return EXIT_WRONG_RESULT, _say(f"{len(wrong)} case(s) produced wrong elements: {', '.join(wrong[:5])}")
    if failed and rc > 0:  # cases that failed on every rank alike (the ranks went on): the first one's message
        more = f" (and {len(failed) - 1} more: bench.json suite.failed)" if len(failed) > 1 else ""
        return EXIT_FAILED, _say(f"{len(failed)} case(s) failed: {failed[0]['case']}: {failed[0]['message']}{more}")
    if rc == 0:
        return EXIT_OK, None
    return EXIT_FAILED, cause or _say(f"error: {starter} exited with status {rc} and no rank named a cause")


def _interrupted(signum: int, run_dir: Path, case: str | None) -> str:
    """``interrupted in <case>, 3 cases saved in <run>/bench.json (SIGINT)``: ``case`` is the last one rank 0
    started (``after`` it when it was saved before the signal)."""
    saved = [b.get("fullname") for b in _benchmarks(run_dir)]
    if case is None:
        where = "before the first case"
    else:
        where = f"{'after' if case in saved else 'in'} {progress.short_case(case, len(case))}"
    kept = f"{len(saved)} case{'' if len(saved) == 1 else 's'} saved"
    kept += f" in {run_dir / 'bench.json'}" if saved else ""
    return f"interrupted {where}, {kept} ({rank_exits.signal_name(signum)})"


def _benchmarks(run_dir: Path) -> list[dict]:
    """The records rank 0 saved in bench.json (none when it is missing or unreadable)."""
    try:
        out = json.loads((run_dir / "bench.json").read_text()).get("benchmarks") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [b for b in out if isinstance(b, dict)]


def _unexplained(first: dict, failures: list[dict]) -> bool:
    """Whether torchrun's first failed rank left no note of its own and every note there is one of the
    other ranks losing it (a rank killed by a signal writes none, its peers' socket errors race its exit):
    then torchrun's root cause is the one line that names it."""
    noted = {fl.get("rank") for fl in failures}
    return first["rank"] not in noted and all(fl.get("kind") == "peer_failure" for fl in failures)


def _failed_cases(run_dir: Path) -> list[dict]:
    """The cases rank 0 saw fail alike on every rank (bench.json ``suite.failed``), oldest first."""
    try:
        failed = json.loads((run_dir / "bench.json").read_text()).get("suite", {}).get("failed") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [f for f in failed if isinstance(f, dict) and "case" in f and "message" in f]


def _wrong_cases(run_dir: Path) -> list[str]:
    return [b["name"] for b in _benchmarks(run_dir) if (b.get("extra_info", {}).get("n_wrong") or 0) > 0]


def stamp_status(run_dir: Path, status: int, signum: int | None, cause: str | None = None) -> None:
    """Record the launcher's verdict (and the line naming its cause) in bench.json, atomically.
    ResultsWriteError (an OSError) when bench.json cannot be read back or written: the file is unchanged."""
    path = run_dir / "bench.json"
    try:
        run = json.loads(path.read_text())
    except ValueError as e:
        why = f"cannot record the exit status in {path}: not valid JSON ({e})"
        raise ResultsWriteError(errno.EINVAL, why) from None
    except OSError as e:
        raise write_error(path, e) from None
    s = run.setdefault("suite", {})
    s["exit_status"] = status
    s["interrupted_by_signal"] = signum
    if cause is not None:
        s["cause"] = cause
    diag = hang.read_verdict(run_dir)
    if diag is not None:  # the launcher's hang diagnosis (failures/hang.txt has the per-rank lines)
        s["hang_diagnosis"] = {"kind": diag.get("kind"), "verdict": diag.get("verdict")}
    if status != EXIT_OK:
        s["complete"] = False if signum is not None or status == EXIT_PEER_FAILURE else s.get("complete", False)
    write_json_atomic(path, run)
