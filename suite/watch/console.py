"""Where the watch's flags show while the run goes on: one line on rank 0's terminal, past pytest's capture of the
case's output, and a marker on this rank's track of the run's timeline (suite/harness/journal/timeline.py).

pytest captures a case's stderr; its capture manager, which can step aside, is reached through pytest's config.
The harness's plugin names suite/watch/plugin.py in its ``pytest_plugins``: before each case runs, it gives this
rank's timeline (held by the journal, which lives as long as the process's wrapped ops) a ``console`` that writes
past the capture. No module state: without a journal (a unit test, a script) the line goes to stderr as it is.
"""

from __future__ import annotations

import contextlib
import functools
import sys


def timeline():
    from suite.harness import journal

    j = journal.current()
    return j.timeline if j is not None else None


def write(capman, line: str) -> None:
    with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
        out = sys.stderr
        out.write(("\r\033[K" if out.isatty() else "") + line + "\n")  # over a live progress line, if any
        out.flush()


def say(line: str) -> None:
    """``line`` on the terminal now, on its own line."""
    t = timeline()
    (t.console if t is not None and t.console is not None else functools.partial(write, None))(line)


def mark(name: str, clock: float, args: dict) -> None:
    """A marker named ``name`` at ``clock`` (``time.perf_counter``) on this rank's track of the run's timeline."""
    t = timeline()
    if t is not None:
        t.marker(name, clock, args)
