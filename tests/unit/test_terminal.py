"""pytest's private terminal writer, behind suite/harness/pytest/terminal.py: on this pytest's own reporter,
output goes where the adapter points it and back."""

import io

import pytest

from suite.harness.pytest import terminal


def test_the_reporter_writes_where_it_is_pointed_and_back(request):
    tr = request.config.pluginmanager.getplugin("terminalreporter")
    a, b = io.StringIO(), io.StringIO()
    original = terminal.redirect(tr, a, like_current=True)
    try:
        tr.write_line("to a")
        writer_a = terminal.redirect(tr, b)
        tr.write("to b")
        terminal.restore(tr, writer_a, pending=" pending")  # through a's writer, after a's line
        tr.write_line(" and on")
    finally:
        terminal.restore(tr, original)
    # (write_line first ends a line of dots the reporter may be in, as the run's own output would)
    assert a.getvalue().lstrip("\n") == "to a\n pending and on\n" and b.getvalue() == "to b"
    assert terminal.redirect(tr, io.StringIO()) is original  # what was restored is the writer in use
    terminal.restore(tr, original)


def test_another_major_version_is_refused_with_the_fix():
    terminal.check_version("9.2.0")
    terminal.check_version()  # the installed one
    with pytest.raises(terminal.UnsupportedVersion, match="pytest 10.0.0 is installed.*requirements.txt"):
        terminal.check_version("10.0.0")


def test_a_forgotten_interrupt_prints_no_block_of_pytests_own():
    from _pytest.terminal import TerminalReporter

    assert callable(TerminalReporter._report_keyboardinterrupt)  # the method the adapter replaces is there
    tr = TerminalReporter.__new__(TerminalReporter)  # no config needed: only the block's method is replaced
    terminal.forget_interrupt(tr)
    assert tr._report_keyboardinterrupt() is None  # it would assert on, then print, the interrupt it kept
    terminal.forget_interrupt(None)  # pytest's terminal plugin off: nothing to forget
