"""The one place the suite touches pytest's private terminal API.

pytest has no public way to point its terminal reporter's output elsewhere, and the plugin needs two
things of it: every rank but 0 prints nothing (its reporter writes to /dev/null), and rank 0's live
progress line keeps pytest's own output above it. Both replace ``TerminalReporter._tw`` with a writer of
their own, a ``_pytest.terminal.TerminalWriter``; both are private. A third: after a Ctrl-C the reporter
prints no KeyboardInterrupt block (``forget_interrupt`` replaces its private ``_report_keyboardinterrupt``).
``check_version`` refuses a pytest of another major version than the one this was written and tested against
(pinned in requirements.txt; tests/dist/test_progress_dist.py runs the live line on a terminal,
tests/unit/test_terminal.py the rest)."""

from __future__ import annotations

from typing import TextIO

SUPPORTED_MAJOR = 9
"""pytest's major version whose ``TerminalReporter._tw`` this adapter replaces (tested with 9.2.0)."""


class UnsupportedVersion(RuntimeError):
    pass


def check_version(version: str | None = None) -> None:
    """Raise UnsupportedVersion unless pytest is of the supported major version."""
    if version is None:
        import pytest

        version = pytest.__version__
    if version.split(".")[0] != str(SUPPORTED_MAJOR):
        raise UnsupportedVersion(
            f"pytest {version} is installed; the suite supports pytest {SUPPORTED_MAJOR}.x (it points pytest's "
            "terminal writer, a private API, at its progress line): pip install -r requirements.txt"
        )


def redirect(reporter, stream: TextIO, *, like_current: bool = False):
    """Point ``reporter``'s output at ``stream``; return the writer it had, for ``restore``. With
    ``like_current`` the new writer keeps the old one's markup, highlighting and width."""
    from _pytest.terminal import TerminalWriter

    old = reporter._tw
    tw = TerminalWriter(stream)
    if like_current:
        tw.hasmarkup, tw.code_highlight, tw.fullwidth = old.hasmarkup, old.code_highlight, old.fullwidth
    reporter._tw = tw
    return old


def forget_interrupt(reporter) -> None:
    """``reporter`` prints no KeyboardInterrupt block at the session's end (its ``!!! KeyboardInterrupt !!!`` line,
    where the interrupt landed, the ``--full-trace`` hint): the launcher says what was interrupted and where its
    results are."""
    if reporter is not None:  # None: pytest's terminal plugin is off (-p no:terminal)
        reporter._report_keyboardinterrupt = lambda: None


def restore(reporter, writer, pending: str = "") -> None:
    """Give ``reporter`` back ``writer``, then write ``pending`` (a partial line) through it, so that the
    writer that tracks the line's position knows of it."""
    reporter._tw = writer
    if pending:
        writer.write(pending)
