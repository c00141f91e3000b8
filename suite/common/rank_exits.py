"""How a rank started by mpiexec or srun ended, as its parent saw it: what torchrun's "Root Cause" block says.

torchrun's agent is each rank's parent, so it knows how each ended (an exit status, or the signal that killed it)
and names the first that failed. MPICH's hydra cannot be read for that: once one rank dies of a signal its
clean-up kills the others, and its "BAD TERMINATION" block then names the first process of its list with a bad
end (rank 0 as often as the one that died) and its exit string the last signal it saw. So each rank of an MPI run
has a small parent of its own (suite/harness/mpi/rank.py) which, when the rank ends other than with status 0 and
not on a signal that parent passed on, writes ``<run>/hang/rank<r>.exit``: the rank, its host, how it ended and
when. The launcher reads the earliest as it reads torchrun's root cause (suite/launch/supervise.py), and on
seeing one ends the other ranks, as torchrun does. Pure Python, no torch: both sides read it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from suite.common.fileio import write_json_atomic


def path(run_dir: str | os.PathLike, rank: int) -> Path:
    return Path(run_dir) / "hang" / f"rank{rank}.exit"


def record(run_dir: str | os.PathLike, rank: int, host: str, wait_status: int, when: float | None = None) -> None:
    """Leave how rank ``rank`` ended (``wait_status`` as os.waitpid gives it), best effort."""
    exitcode = os.waitstatus_to_exitcode(wait_status)  # a signal's is its number, negative
    sig = signal_name(-exitcode) if exitcode < 0 else None
    ended = {"rank": rank, "host": host, "exitcode": exitcode, "signal": sig, "time_unix": when or time.time()}
    try:
        write_json_atomic(path(run_dir, rank), ended)
    except OSError:  # the run still ends as the rank did; the launcher then says no rank named a cause
        pass


def signal_name(signum: int) -> str:
    """``SIGKILL`` for 9 (``signal 99`` for a number with no name)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def any_ended(run_dir: str | os.PathLike) -> bool:
    """Whether some rank has ended other than with status 0 (a record is there)."""
    return any((Path(run_dir) / "hang").glob("rank*.exit"))


def first(run_dir: str | os.PathLike) -> dict | None:
    """The rank that ended first other than with status 0, in the form of supervise.root_cause (rank, host,
    exitcode: negative for a signal, signal: its name or None); None when no rank left a readable record."""
    ended = []
    for p in (Path(run_dir) / "hang").glob("rank*.exit"):
        try:
            e = json.loads(p.read_text())
            ended.append((float(e["time_unix"]), int(e["rank"]), e))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # cut short: the other records still count
    if not ended:
        return None
    _, _, e = min(ended, key=lambda t: t[:2])
    return {
        "rank": int(e["rank"]),
        "host": str(e.get("host", "?")),
        "exitcode": int(e["exitcode"]),
        "signal": e["signal"],
    }
