"""Rank 0's progress through a run: one live line on a terminal, periodic lines everywhere else.

``SUITE_PROGRESS`` chooses (``mode``):

- ``auto`` (default): when rank 0's stdout is a terminal with a size (``make bench-cpu`` typed in a shell:
  torchrun's workers inherit the launcher's stdout; ``is_terminal``), one live line drawn with rich at the
  bottom of the screen: a bar, cases done of total, elapsed, the time left and the case running now.
  Anywhere else (logs, CI, the compose nodes, Slurm, a terminal of size 0x0) the periodic lines below;
- ``plain``: the periodic lines also on a terminal: ``# progress: 40/133 cases, 1m10s elapsed, ~2m43s
  left`` every ``SUITE_PROGRESS_S`` seconds (default 30);
- ``off``: neither.

The time left is the mean time per case so far times the cases left, in both forms. pytest's own output
is printed above the live line (``LiveLine.stream``), so neither overwrites the other.
"""

from __future__ import annotations

import io
import os
import time

from pathlib import Path

from suite.common.fileio import write_text_atomic
from suite.common.switches import switch
from suite.registry import experiment_of


ERASE_LINE = "\r\x1b[2K"
"""Back to the start of the terminal's current line, and clear it (what precedes a line printed over the live one)."""
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"
RESET_TERMINAL = ERASE_LINE + SHOW_CURSOR
"""What a terminal needs after a live line's process died without erasing it (killed): the line erased
and the cursor shown again (rich hides it while the line is live)."""
CASE_FILE = "running_case.txt"
"""Rank 0 writes the id of each case it starts to ``<run>/running_case.txt`` (``note_case``), so that the
launcher can say which case an interrupt stopped; the launcher removes it once the ranks have ended
(``take_case``)."""
BAR_WIDTH = 12
"""Columns of the live line's bar; the text after it takes the rest of the terminal's width."""


def mode(env=None, stdout_is_terminal: bool = False) -> str:
    """``live``, ``plain`` or ``off`` for this process, from ``SUITE_PROGRESS`` in ``env`` (default
    os.environ; suite/common/switches.py SWITCHES); ValueError names the choices for any other value."""
    env = os.environ if env is None else env
    raw = switch("SUITE_PROGRESS", env)
    if raw == "auto":
        dumb = str(env.get("TERM", "")).lower() == "dumb"
        return "live" if stdout_is_terminal and not dumb else "plain"
    return raw


def is_terminal(out) -> bool:
    """Whether ``out`` (a stream or a file descriptor) is a terminal that can hold the live line: a terminal
    that reports its size as 0x0 (some container and CI pseudo-terminals) cannot, and gets the plain lines."""
    try:
        fd = out if isinstance(out, int) else out.fileno()
        return os.isatty(fd) and os.get_terminal_size(fd).columns > 0
    except (OSError, ValueError, AttributeError):  # closed, not a file (a test's buffer), or no size at all
        return False


def note_case(results_dir: str | None, nodeid: str) -> None:
    """Rank 0: the case it starts now, for the launcher (best effort: only an interrupt's message reads it)."""
    if not results_dir:
        return
    try:
        write_text_atomic(Path(results_dir) / CASE_FILE, nodeid + "\n", durable=False)
    except OSError:
        pass


def take_case(run_dir: Path) -> str | None:
    """The launcher, once the ranks have ended: the last case rank 0 started (None if none), its file removed."""
    path = Path(run_dir) / CASE_FILE
    try:
        case = path.read_text().strip() or None
        path.unlink()
    except OSError:
        return None
    return case


def fmt_duration(s: float) -> str:
    """``42s``, ``1m10s``, ``2h05m``."""
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


def left_s(done: int, total: int, elapsed_s: float) -> float | None:
    """Time left: the mean time per case so far times the cases left; None before the first case."""
    return elapsed_s / done * (total - done) if done > 0 else None


def plain_line(done: int, total: int, elapsed_s: float) -> str:
    """The periodic line of logs and CI."""
    left = left_s(done, total, elapsed_s) or 0.0
    return f"# progress: {done}/{total} cases, {fmt_duration(elapsed_s)} elapsed, ~{fmt_duration(left)} left"


def short_case(nodeid: str, width: int) -> str:
    """A test id for the live line: ``experiments/collectives/cases.py::test_collective[all_reduce-...]``
    becomes ``collectives[all_reduce-...]`` and ``experiments/backends/cases.py::test_gloo_path[...]``
    ``backends::gloo_path[...]`` (the path but the experiment's name, ``test_`` and a name that only
    repeats the experiment's dropped); if still longer than ``width`` its middle is replaced by ``…`` (the head names
    the experiment and op, the tail the size)."""
    _, _, rest = nodeid.partition("::")
    module = experiment_of(nodeid)
    name, bracket, params = rest.partition("[")
    name = name.removeprefix("test_")
    repeats = module.startswith(name) or name.startswith(module)
    s = module + ("" if not name or repeats else f"::{name}") + bracket + params
    if len(s) <= width:
        return s
    if width < 2:
        return s[:width]
    head = (width - 1) // 2
    return s[:head] + "…" + s[len(s) - (width - 1 - head) :]


def live_text(done: int, total: int, elapsed_s: float, case: str, width: int) -> str:
    """What the live line says after its bar, ``width`` characters at most: cases done of total,
    elapsed, time left, and as much of the current case's id as fits."""
    left = left_s(done, total, elapsed_s)
    text = (
        f"{done}/{total} cases  {fmt_duration(elapsed_s)} elapsed  "
        f"{'~' + fmt_duration(left) if left is not None else '?'} left"
    )
    room = width - len(text) - 2
    if case and room >= 8:
        text += "  " + short_case(case, room)
    return text[:width]


class _Above(io.TextIOBase):
    """A text stream whose whole lines are printed above the live line (rich prints them and draws
    the line again below); a partial line (pytest's dots) waits for its end."""

    def __init__(self, console, target):
        self._console, self._target, self.pending = console, target, ""

    def write(self, text: str) -> int:
        from rich.text import Text

        self.pending += text
        if "\n" in self.pending:
            lines, self.pending = self.pending.rsplit("\n", 1)
            self._console.print(Text.from_ansi(lines), soft_wrap=True)
        return len(text)

    def flush(self) -> None:  # a partial line stays pending until its newline, or until stop
        pass

    def isatty(self) -> bool:
        return self._target.isatty()

    @property
    def encoding(self):
        return getattr(self._target, "encoding", "utf-8")


class LiveLine:
    """The live line. ``start`` draws it on ``file`` (a terminal of its own: pytest's capture redirects
    fd 1 while a test runs); ``stream`` is where the text that should appear above it goes; ``update``
    moves it on; ``stop`` erases it and gives back what a partial line still holds."""

    def __init__(self, file, total: int, clock=time.monotonic):
        from rich.console import Console

        self.total, self.done, self.case, self._clock = total, 0, "", clock
        try:
            self._fd = file.fileno()
        except (OSError, ValueError, AttributeError):  # not a file (a test's buffer): rich's width stays
            self._fd = None
        self.console = Console(file=file, highlight=False)
        self.stream = _Above(self.console, file)
        self._t0 = self._drawn_at = clock()
        self._live = None

    def _render(self):
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        if self._fd is not None:
            try:  # the terminal's size now (rich would look at fd 1, which pytest's capture holds during a test,
                # and take COLUMNS/LINES from the environment: LINES=0 would draw the line as a bare "...")
                size = os.get_terminal_size(self._fd)
                self.console.size = (size.columns, max(size.lines, 1))
            except OSError:
                pass
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=BAR_WIDTH, no_wrap=True)
        grid.add_column(no_wrap=True, overflow="ellipsis")
        width = max(self.console.width - BAR_WIDTH - 2, 10)
        text = live_text(self.done, self.total, self._clock() - self._t0, self.case, width)
        grid.add_row(ProgressBar(total=max(self.total, 1), completed=self.done, width=BAR_WIDTH), Text(text))
        return grid

    def start(self) -> None:
        from rich.live import Live

        self._live = Live(
            get_renderable=self._render,
            console=self.console,
            refresh_per_second=2,  # the elapsed time moves on during a long case
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start(refresh=True)

    def update(self, done: int | None = None, case: str | None = None) -> None:
        """New counts or case; drawn now unless the line was drawn less than 0.1 s ago (the timer
        draws it within 0.5 s anyway: many short cases do not each cost a drawing)."""
        if done is not None:
            self.done = done
        if case is not None:
            self.case = case
        now = self._clock()
        if self._live is not None and now - self._drawn_at >= 0.1:
            self._drawn_at = now
            self._live.refresh()

    def stop(self) -> str:
        """Erase the line (idempotent); returns the partial line the stream still holds."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        pending, self.stream.pending = self.stream.pending, ""
        return pending
