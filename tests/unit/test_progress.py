"""suite.common.progress: the mode from SUITE_PROGRESS, the texts of both forms, and the live line drawn into a
string (the real terminal: tests/dist/test_progress_dist.py)."""

from __future__ import annotations

import io
import os

import pytest

from suite.common import progress
from suite.common.switches import switch


def test_mode_is_live_only_on_a_terminal_unless_plain_or_off():
    assert progress.mode({}, stdout_is_terminal=True) == "live"
    assert progress.mode({}, stdout_is_terminal=False) == "plain"
    assert progress.mode({"SUITE_PROGRESS": "auto", "TERM": "dumb"}, stdout_is_terminal=True) == "plain"
    assert progress.mode({"SUITE_PROGRESS": " Plain "}, stdout_is_terminal=True) == "plain"
    assert progress.mode({"SUITE_PROGRESS": "off"}, stdout_is_terminal=True) == "off"
    assert progress.mode({"SUITE_PROGRESS": "off"}, stdout_is_terminal=False) == "off"
    assert progress.mode({"SUITE_PROGRESS": ""}, stdout_is_terminal=True) == "live"
    with pytest.raises(ValueError, match=r"SUITE_PROGRESS='live': choose auto .*, plain or off"):
        progress.mode({"SUITE_PROGRESS": "live"})


def test_the_period_defaults_to_30():
    assert switch("SUITE_PROGRESS_S", {}) == 30.0
    assert switch("SUITE_PROGRESS_S", {"SUITE_PROGRESS_S": "0"}) == 0.0
    assert switch("SUITE_PROGRESS_S", {"SUITE_PROGRESS_S": ""}) == 30.0
    for bad in ("soon", "-1", "nan", "inf"):
        with pytest.raises(ValueError, match="a number >= 0"):
            switch("SUITE_PROGRESS_S", {"SUITE_PROGRESS_S": bad})


def test_durations_and_the_time_left():
    assert [progress.fmt_duration(s) for s in (0, 4.6, 59.4, 70, 3599, 3600, 7530)] == [
        "0s",
        "5s",
        "59s",
        "1m10s",
        "59m59s",
        "1h00m",
        "2h05m",
    ]
    assert progress.left_s(0, 10, 5.0) is None
    assert progress.left_s(4, 10, 8.0) == pytest.approx(12.0)  # 2 s per case, 6 to go
    # the periodic line, character for character as logs have always had it
    assert progress.plain_line(40, 133, 70.0) == "# progress: 40/133 cases, 1m10s elapsed, ~2m43s left"


def test_short_case_drops_what_repeats_and_cuts_the_middle():
    nodeid = "experiments/collectives/cases.py::test_collective[all_reduce-sum-float32-1024B-inplace]"
    assert progress.short_case(nodeid, 100) == "collectives[all_reduce-sum-float32-1024B-inplace]"
    gloo_path = "experiments/backends/cases.py::test_gloo_path[x-1K]"
    assert progress.short_case(gloo_path, 100) == "backends::gloo_path[x-1K]"
    assert progress.short_case("experiments/ddp/cases.py::test_ddp[mlp]", 100) == "ddp[mlp]"
    assert progress.short_case("experiments/ddp.py::test_ddp[mlp]", 100) == "ddp[mlp]"  # a run before the folders
    assert progress.short_case("tests/unit/test_x.py::test_y", 100) == "test_x::y"
    assert progress.short_case(nodeid, 21) == "collective…B-inplace]"  # 10 + … + 10
    assert progress.short_case(nodeid, 22) == "collective…4B-inplace]"
    assert progress.short_case(nodeid, 1) == "c" and progress.short_case(nodeid, 0) == ""


def test_live_text_fits_its_width_and_drops_the_case_before_the_counts():
    nodeid = "experiments/collectives/cases.py::test_collective[all_reduce-sum-float32-1024B-inplace]"
    assert progress.live_text(0, 133, 1.0, "", 80) == "0/133 cases  1s elapsed  ? left"
    full = progress.live_text(40, 133, 70.0, nodeid, 200)
    assert full == "40/133 cases  1m10s elapsed  ~2m43s left  collectives[all_reduce-sum-float32-1024B-inplace]"
    for width in (30, 50, 70):
        assert len(progress.live_text(40, 133, 70.0, nodeid, width)) <= width
    assert progress.live_text(40, 133, 70.0, nodeid, 45) == "40/133 cases  1m10s elapsed  ~2m43s left"


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_live_line_prints_whole_lines_above_it_and_hands_back_a_partial_one(monkeypatch):
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_INTERACTIVE", "TTY_COMPATIBLE", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    term, now = _Terminal(), [100.0]
    live = progress.LiveLine(term, total=3, clock=lambda: now[0])
    live.start()
    try:
        live.stream.write("..")
        assert live.stream.pending == ".."  # a partial line waits
        live.stream.write(". [33%]\nF")
        now[0] += 2.0
        live.update(done=1, case="experiments/p2p/cases.py::test_p2p[ring-1K]")
    finally:
        pending = live.stop()
    assert pending == "F" and live.stop() == ""  # stop is idempotent
    out = term.getvalue()
    drawn = out.rindex("1/3 cases  2s elapsed  ~4s left  p2p[ring-1K]")
    assert out.index("... [33%]") < drawn  # the whole line went above the line
    assert out.startswith(progress.HIDE_CURSOR) and progress.SHOW_CURSOR in out[drawn:]


def test_a_terminal_that_reports_no_size_is_no_terminal_for_the_live_line():
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        assert progress.is_terminal(slave)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
        assert not progress.is_terminal(slave)  # 0x0: the plain lines instead
    finally:
        os.close(master)
        os.close(slave)
    assert not progress.is_terminal(io.StringIO()) and not progress.is_terminal(slave)  # a buffer; a closed fd


def test_the_live_line_is_drawn_on_a_sized_terminal_whose_environment_says_0x0(monkeypatch):
    """LINES=0 COLUMNS=0 in the environment (as some CI shells and containers export them) on a terminal of
    24x80: each drawing of the line says the counts, not rich's bare "..." of a screen 0 lines tall."""
    import fcntl
    import select
    import struct
    import termios

    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_INTERACTIVE", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("LINES", "0")
    monkeypatch.setenv("COLUMNS", "0")
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    out = b""
    with os.fdopen(slave, "w") as term:
        assert progress.is_terminal(term)
        live = progress.LiveLine(term, total=3, clock=lambda: 100.0)
        live.start()
        try:
            live.update(done=1, case="experiments/p2p/cases.py::test_p2p[ring-1K]")
        finally:
            live.stop()
        term.flush()
        while select.select([master], [], [], 0.2)[0]:
            out += os.read(master, 65536)
    os.close(master)
    drawn = out.decode(errors="replace")
    assert "0/3 cases" in drawn and "..." not in drawn, drawn  # every drawing, not only the last one at stop
