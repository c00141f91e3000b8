"""Failure reporting shared by every rank and the launcher: exit statuses and the
``failures/rank<r>.json`` notes the launcher's summary reads.

Small and free of the suite's other modules, so the process-group code, the pytest
bridge and the launcher all use the same statuses without importing each other.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

from suite.common.fileio import write_json_atomic

# Exit statuses of a rank and of the run (docs/failures.md, the exit-status table); the most specific cause wins.
EXIT_OK = 0
EXIT_FAILED = 1  # a case errored, or torchrun failed before any rank could name a cause
EXIT_BAD_INPUT = 2  # a knob has an unusable value; nothing started
EXIT_PREFLIGHT = 3  # this host cannot run it (backend, GPU, memory, /dev/shm, interface)
EXIT_RENDEZVOUS = 4  # MASTER_ADDR does not resolve, MASTER_PORT in use
EXIT_PEER_FAILURE = 5  # a rank died, froze or became unreachable mid-run
EXIT_WRONG_RESULT = 6  # a collective produced wrong elements
EXIT_NOTHING_SELECTED = 7  # the case selection (-k / K=...) matched no case; nothing was measured
EXIT_FINDING = 8  # the doctor found a slow link, a straggler or a weak node (every probe ran and was correct)
EXIT_DIVERGED = 9  # the ranks issued different collectives: one skipped, reordered or never reached one
EXIT_IO = 10  # the run's files could not be written or read (disk full, file-size limit, permissions)
EXIT_SIGINT = 130
EXIT_SIGTERM = 143

MEANING = {
    EXIT_OK: "every case ran and was correct",
    EXIT_FAILED: "a case or the launch failed",
    EXIT_BAD_INPUT: "bad input",
    EXIT_PREFLIGHT: "preflight failed",
    EXIT_RENDEZVOUS: "rendezvous failed",
    EXIT_PEER_FAILURE: "a peer was lost mid-run",
    EXIT_WRONG_RESULT: "wrong results",
    EXIT_NOTHING_SELECTED: "nothing selected",
    EXIT_FINDING: "the doctor found a problem",
    EXIT_DIVERGED: "the ranks diverged",
    EXIT_IO: "the run's files could not be written or read",
    EXIT_SIGINT: "interrupted (SIGINT)",
    EXIT_SIGTERM: "interrupted (SIGTERM)",
}
"""One phrase per exit status (docs/failures.md has the full table)."""


def status_line(status: int) -> str:
    """The launcher's last line for a failed run: make turns every failure into its own 2, scripts/make-status
    (make's arguments) does not."""
    return (
        f"# exit status {status} ({MEANING.get(status, 'unknown')}); make reports any failure as 2 - "
        "`scripts/make-status <target>` and `python -m suite.launch` return this status, and bench.json has it "
        "as suite.exit_status"
    )


def record_failure(results_dir: str | None, rank: int, cause: str, **extra) -> None:
    """Leave ``<results_dir>/failures/rank<r>.json`` for the launcher's summary (best effort), after the
    rank's op journal, where one is installed, has left its dump (suite/harness/journal/dump.py)."""
    journal = sys.modules.get("suite.harness.journal")  # imported on the ranks only: none to dump elsewhere
    if journal is not None and journal.current() is not None:
        try:
            journal.current().dump(f"this rank failed: {cause}", failed=True)
        except Exception:  # reporting a failure must never raise a second one
            pass
    if not results_dir:
        return
    try:
        write_json_atomic(
            Path(results_dir) / "failures" / f"rank{rank}.json",
            {"rank": rank, "host": socket.gethostname(), "cause": cause, "time_unix": time.time(), **extra},
        )
    except Exception:  # reporting a failure must never raise a second one
        pass


def reported_and_lost(results_dir: Path) -> tuple[set[int], set[int]]:
    """The ranks that left a failure note in ``<results_dir>/failures`` and the ranks those notes name lost (a
    heartbeat that stopped: frozen, partitioned or dead, so none of them answers a request or exits on its own)."""
    reported, lost = set(), set()
    for p in Path(results_dir, "failures").glob("rank*.json"):
        try:
            note = json.loads(p.read_text())
            reported.add(int(note["rank"]))
            lost.update(int(r) for r in note.get("lost_ranks") or ())
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a note being written, or not one of a rank's
    return reported, lost


def cause_note(notes: list[dict], host: str | None = None) -> dict | None:
    """The note that says what went wrong first, of the ranks' ``failures/rank<r>.json`` notes.

    A rank's own failure (it raised, diverged, could not write) comes before any rank's loss of a peer. Of the
    losses, a heartbeat verdict, which names the ranks it lost (``lost_ranks``), comes before a collective's
    socket error, which names an address at most, and often the wrong peer: the rank that saw a frozen node
    first ends itself, and its sockets closing are what its other peers report. Then ``host``'s own notes
    (the node that stopped first, in a multi-node run), then rank order."""

    def order(note: dict) -> tuple:
        lost_peer = note.get("kind") == "peer_failure"
        rank = note.get("rank")
        return (
            lost_peer,
            lost_peer and not note.get("lost_ranks"),
            note.get("host") != host,
            rank if isinstance(rank, int) else float("inf"),
        )

    return min(notes, key=order, default=None)


def read_notes(results_dir: str | Path) -> list[dict]:
    """The readable notes in ``<results_dir>/failures`` (a note cut short or being written is left out)."""
    notes = []
    for p in sorted(Path(results_dir, "failures").glob("rank*.json")):
        try:
            note = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(note, dict):
            notes.append(note)
    return notes


def node_cause(results_dir: str | Path, node: str) -> str:
    """The cause to print for ``node``, the first node of a multi-node run to stop non-zero (docker/first-failure.sh):
    the run's root cause, with the rank and node that wrote it where that is another node."""
    note = cause_note(read_notes(results_dir), host=node)
    if note is None or not note.get("cause"):
        return ""
    if note.get("host") == node:
        return str(note["cause"])
    return f"rank {note.get('rank')} on {note.get('host')}: {note['cause']}"


def closing_line(results_dir: str | Path, node: str, status: int) -> str:
    """The closing line of a multi-node run that did not succeed, for ``node``, its first node to stop non-zero with
    ``status`` (docker/first-failure.sh prints it). A status of EXIT_FINDING with the doctor's verdict stored is the
    doctor's finding, not a failure: every probe ran and was correct, and the doctor found something; its headline
    (``doctor.json``) is what the run found. Otherwise the node failed, with the run's root cause (``node_cause``)."""
    doctor = Path(results_dir, "doctor.json")
    if status == EXIT_FINDING:
        try:
            headline = json.loads(doctor.read_text()).get("headline")
        except (OSError, ValueError, AttributeError):
            headline = None
        if headline:
            return f"# doctor: {headline} ({node} exited with the doctor's status {status}; {doctor})"
    cause = node_cause(results_dir, node)
    return f"# first failure: {node} exited with status {status}" + (f": {cause}" if cause else "")


if __name__ == "__main__":  # python -m suite.common.failures closing <run dir> <node> <status>
    if len(sys.argv) != 5 or sys.argv[1] != "closing" or not sys.argv[4].isdigit():
        print("usage: python -m suite.common.failures closing <run dir> <node> <status>", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    print(closing_line(sys.argv[2], sys.argv[3], int(sys.argv[4])))
