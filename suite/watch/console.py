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

from suite.watch import detect, foreign, pauses


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


def entry(f: detect.Flag, onset_unix: float, detected_unix: float, after_s: float, late_s: float) -> dict:
    """A flag's entry of the record's ``slowdowns`` (its onset and detection in steps and Unix seconds)."""
    return {
        "target": f.target,
        "kind": f.kind,
        "ranks": list(f.ranks),
        "metric": f.metric,
        "ratio": round(f.ratio, 3),
        "onset_step": f.onset,
        "detected_step": f.detected,
        "onset_unix": round(onset_unix, 3),
        "detected_unix": round(detected_unix, 3),
        "detected_after_onset_s": round(after_s, 3),
        "p": f.p,
        "evidence": f.note
        or (
            f"{f.metric} {f.ratio:z.2f}x its peers' {'mean' if f.test == 'pauses' else 'median'} over {f.after} "
            f"steps since step {f.onset} against the {f.before} before; {f.own_ratio:z.2f}x its own past; arrives "
            f"{1e3 * late_s:z.1f} ms after the first rank at the step's last all-reduce (median since the onset); "
            + (
                f"{f.events} pauses {pauses.SPIKE_X:z.0f}x the usual step or longer, none in the {f.before} steps "
                f"before ({detect.p_text(f.p)})"
                if f.test == "pauses"
                else f"rank-sum {detect.p_text(f.p)}"
            )
            + foreign.evidence(f.foreign)
        ),
        "test": f.test,
        "foreign_cpu_pct": f.foreign,
        "class": foreign.classed(f.foreign),
    }
