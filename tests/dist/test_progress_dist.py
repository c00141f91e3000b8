"""Rank 0's progress on a real 2-rank run through the launcher (suite/common/progress.py): on a terminal (a
pseudo-terminal here) one live line with cases done of total, elapsed, time left and the case, erased
at the end and after a failure, Ctrl-C or a killed rank 0; without a terminal the periodic
``# progress:`` lines and not one control sequence."""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import psutil
import pytest

from suite.common import progress
from tests.conftest import ROOT, launch_command, run_suite

pytestmark = pytest.mark.slow

TINY = ["--experiments", "collectives", "--min-bytes", "1K", "--max-bytes", "4K", "--iters", "3", "--warmup", "1"]
CASES = ["--", "-k", "all_reduce-sum or broadcast"]  # 4 cases: all_reduce-sum and broadcast, in place, 1K and 4K
LIVE = re.compile(r"(\d+)/(\d+) cases  \d+s elapsed  (?:\?|~\d+s) left")  # the live line's text
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"
# what a terminal shows on its own; rich and the progress line are judged apart from these
_ENV_DROP = ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "SUITE_PROGRESS")


def on_terminal(cmd, env=None, cols=120, interrupt_when=None, timeout=240, cwd=ROOT, rows=40):
    """``cmd`` with stdin, stdout and stderr on a pseudo-terminal of ``rows`` x ``cols``, as typed in a
    shell: (exit status, everything the terminal received). ``interrupt_when``: a text; once the output
    holds it, SIGINT goes to the command's process group (what Ctrl-C does)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    e = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
    e.update({"TERM": "xterm-256color", "SUITE_REPORT": "0", **(env or {})})
    proc = subprocess.Popen(cmd, cwd=cwd, env=e, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    out, sent, deadline = b"", False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if interrupt_when and not sent and interrupt_when.encode() in out:
                os.killpg(proc.pid, signal.SIGINT)
                sent = True
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal's other end has closed it
                break
            if not chunk:
                break
            out += chunk
        else:
            proc.kill()
            pytest.fail(f"no end within {timeout} s:\n{out.decode(errors='replace')[-3000:]}")
        return proc.wait(timeout=60), out.decode(errors="replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()


def launch_on_terminal(tmp_path, *args, **kw):
    """``python -m suite.launch`` on 2 Gloo ranks (``on_terminal``)."""
    return on_terminal(launch_command(tmp_path, *args), **kw)


_SGR = re.compile(r"\x1b\[[0-9;]*m")


def words(term: str) -> str:
    """The terminal's text without colours (pytest's "4 passed" is coloured on a terminal)."""
    return _SGR.sub("", term)


def live_states(term: str) -> list[tuple[int, int]]:
    """(cases done, total) of every drawing of the live line."""
    return [(int(d), int(t)) for d, t in LIVE.findall(term)]


SUMMARY = re.compile(r"FAILURES|\d+ (?:passed|failed)|KeyboardInterrupt")


def ends_clean(term: str, by_rank_0: bool = True) -> bool:
    """The cursor rich hid is shown again, and after the last drawing of the line comes an erase; with
    ``by_rank_0`` both before pytest's summary (rank 0's plugin did it, not the launcher's reset after
    the run, which a killed rank 0 needs)."""
    last = list(LIVE.finditer(term))[-1].end()
    end = len(term)
    if by_rank_0:
        m = SUMMARY.search(term, last)
        if m is None:
            return False
        end = m.start()
    return SHOW_CURSOR in term[term.rindex(HIDE_CURSOR) : end] and "\x1b[2K" in term[last:end]


def test_plain_lines_without_a_terminal(tmp_path):
    proc = run_suite(tmp_path / "pipe", *TINY, *CASES, env={"SUITE_PROGRESS_S": "0"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "\x1b" not in proc.stdout + proc.stderr  # no control sequence in a log
    done = re.findall(r"^# progress: (\d)/4 cases, \d+s elapsed, ~\d+s left$", proc.stdout, re.M)
    assert done == ["1", "2", "3"], proc.stdout[-3000:]  # after every case but the last (SUITE_PROGRESS_S=0)


def test_the_live_line_gives_way_to_failures_and_is_erased_when_rank_0_is_killed(tmp_path):
    # a run whose broadcast cases are wrong: the live line as on any run, drawn from 0/4 to 4/4 with the case,
    # and the failures, which come through the launcher's stderr, each erasing it first
    rc, term = launch_on_terminal(tmp_path / "wrong", *TINY, *CASES, env={"SUITE_INJECT_CORRUPTION": "broadcast"})
    assert rc == 6, term[-3000:]  # EXIT_WRONG_RESULT
    states = live_states(term)
    assert states and states[0] == (0, 4) and states[-1] == (4, 4), term[-3000:]
    assert states == sorted(states)
    assert re.search(r"left  collectives\[(all_reduce-sum|broadcast)-float32-(1024|4096)B-inplace\]", term)  # the case
    assert HIDE_CURSOR in term and SHOW_CURSOR in term[term.rindex(HIDE_CURSOR) :]
    assert "# progress:" not in term  # the live line replaces the periodic lines
    # rank 1's failure lines: each erases the live line first
    assert re.search(r"\r\x1b\[2K\[rank 1\] FAILED experiments/collectives/cases.py::test_collective\[broadcast", term)
    # pytest's and the suite's output (its end summary; the tables are in tables.txt, TABLES=1 prints them)
    assert "# verdict: FAIL: 4 cases, 2 wrong, 0 unchecked" in term, term[-3000:]
    # after the last drawing the line is erased, and what pytest prints comes below it
    below = words(term[list(LIVE.finditer(term))[-1].end() :])
    assert "FAILURES" in below and re.search(r"\b2 failed, 2 passed\b", below) and ends_clean(term), term[-3000:]

    rc, term = launch_on_terminal(tmp_path / "kill", *TINY, *CASES, env={"SUITE_INJECT_FAULT": "kill:0:2"})
    assert rc == 5, term[-3000:]  # EXIT_PEER_FAILURE
    assert live_states(term) and ends_clean(term, by_rank_0=False), term[-3000:]  # the launcher erased it


def test_the_live_line_stops_on_ctrl_c_and_each_mode_shows_what_it_says(tmp_path):
    # rank 0 alone (no torchrun): pytest with the plugin, a KeyboardInterrupt in the second test
    (tmp_path / "test_k.py").write_text(
        "import time\n\ndef test_a():\n    time.sleep(0.5)\n\n"
        "def test_b():\n    raise KeyboardInterrupt\n\ndef test_c():\n    pass\n"
    )
    cmd = [sys.executable, "-m", "pytest", "-p", "suite.harness.pytest.plugin", "-q", "-p", "no:randomly", "test_k.py"]
    env = {"PYTHONPATH": str(ROOT), "SUITE_PROGRESS_S": "0"}
    rc, term = on_terminal(cmd, env=env, cwd=tmp_path, timeout=120)
    assert rc == 2, term[-3000:]  # pytest's "interrupted"
    states = live_states(term)
    assert states and states[-1] == (1, 3) and ends_clean(term), term[-3000:]
    below = term[list(LIVE.finditer(term))[-1].end() :]
    # pytest's summary comes below the line, without its KeyboardInterrupt block (the launcher says what was
    # interrupted: terminal.forget_interrupt)
    assert "1 passed" in below and "KeyboardInterrupt" not in below, below

    rc, term = on_terminal(cmd, env={**env, "SUITE_PROGRESS": "plain"}, cwd=tmp_path, timeout=120)
    assert rc == 2 and "# progress: 1/3 cases" in term and HIDE_CURSOR not in term, term[-3000:]
    rc, term = on_terminal(cmd, env=env, cwd=tmp_path, timeout=120, rows=0, cols=0)  # a terminal of no size
    assert rc == 2 and "# progress: 1/3 cases" in term and HIDE_CURSOR not in term, term[-3000:]  # plain lines
    rc, term = on_terminal(cmd, env={**env, "SUITE_PROGRESS": "off"}, cwd=tmp_path, timeout=120)
    assert rc == 2 and "progress" not in term and HIDE_CURSOR not in term and "1/3 cases" not in term, term[-3000:]
    rc, term = on_terminal(cmd, env={**env, "SUITE_PROGRESS": "fancy"}, cwd=tmp_path, timeout=120)
    assert rc == 4 and "SUITE_PROGRESS='fancy': choose auto" in term, term[-3000:]  # pytest's usage error


def _processes_of(tmp_path) -> list[str]:
    """The command lines of live processes that name ``tmp_path`` (the ranks and torchrun name the run's directory)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if str(tmp_path) in cmdline and p.pid != os.getpid():
            out.append(f"{p.pid}: {cmdline}")
    return out


def test_ctrl_c_names_the_case_it_stopped_keeps_latest_and_ends_every_rank(tmp_path):
    """Ctrl-C (SIGINT to the launcher's process group, as a shell sends it) once a case is running: the launcher
    says which case it stopped and how many it saved, and nothing else (no hang diagnosis, none of torchrun's
    lines); the live line is erased and the cursor shown; ``latest`` still names the run before; bench.json
    holds the measured cases, marked; no process of the run is left."""
    results = tmp_path / "results"
    (results / "before").mkdir(parents=True)
    (results / "latest").symlink_to("before")
    slow = ["--iters", "10", *CASES]  # rank 1 sleeps 0.1 s after each op: ~1 s per case
    rc, term = launch_on_terminal(
        tmp_path, *TINY[:-4], *slow, env={"SUITE_INJECT_DELAY": "1:0.1"}, interrupt_when="1/4 cases"
    )
    assert rc == 130, term[-3000:]  # EXIT_SIGINT
    bench = results / "run" / "bench.json"
    run = json.loads(bench.read_text())
    saved = [progress.short_case(b["fullname"], 999) for b in run["benchmarks"]]
    said = re.search(r"# interrupted (in|after) (\S+), (\d) cases? saved in (\S+) \(SIGINT\)\r\n", term)
    assert said and int(said[3]) == len(saved) >= 1 and said[4] == str(bench), term[-3000:]
    assert said[2] == saved[-1] if said[1] == "after" else said[2] not in saved, (said[0], saved)
    assert re.fullmatch(r"collectives\[(all_reduce-sum|broadcast)-float32-(1024|4096)B-inplace\]", said[2])
    assert run["suite"]["complete"] is False and run["suite"]["exit_status"] == 130 and len(saved) < 4
    assert run["suite"]["cause"] == said[0][2:].rstrip()
    assert "hang diagnosis" not in term and "death signal" not in term, term[-3000:]
    # the live line: drawn, stopped mid-run, erased before the launcher's line
    assert live_states(term) and live_states(term)[-1][0] < 4 and ends_clean(term, by_rank_0=False), term[-3000:]
    assert list(LIVE.finditer(term))[-1].end() < term.rindex("\x1b[2K", 0, said.start()), term[-3000:]
    assert f"# results: {bench} ({results / 'latest'} unchanged)" in term
    assert os.readlink(results / "latest") == "before"
    assert _processes_of(tmp_path) == []
