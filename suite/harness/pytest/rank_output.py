"""Terminal output of each rank: rank 0's progress (the live line or periodic lines, suite/common/progress.py)
and its tables at the end; the other ranks' terminal reporter silenced, their failures one line on stderr."""

from __future__ import annotations

import os
import sys
import time

from suite import results
from suite.harness import phases
from suite.harness.pytest import bench_adapter, terminal
from suite.common import progress
from suite.harness.pytest.run_state import RunState, rank_from_env, state
from suite.common.fileio import write_text_atomic
from suite.report.tables import format_tables


def quiet_rank(config, st: RunState) -> None:
    """A rank but 0 without SUITE_ALL_RANKS_OUTPUT: its terminal reporter writes to /dev/null."""
    # Only rank 0 prints; the others' failures still reach stderr (see
    # failure_line). pytest's capture keeps its own copy of fd 1,
    # so the reporter's writer is pointed at /dev/null instead.
    tr = config.pluginmanager.getplugin("terminalreporter")
    if tr is not None:
        st.devnull = open(os.devnull, "w")  # noqa: SIM115 - open for the session
        terminal.redirect(tr, st.devnull)


def failure_line(report) -> None:
    """A rank but 0: a failed report as one line on stderr."""
    if report.failed and rank_from_env() != 0:
        # the exception's message (e.g. Gloo naming the lost peer), not just where it was raised
        crash = getattr(report.longrepr, "reprcrash", None)
        msg = report.longreprtext.strip().splitlines()
        tail = (
            crash.message.strip().splitlines()[0]
            if crash is not None and crash.message.strip()
            else (msg[-1] if msg else "")
        )
        sys.stderr.write(f"[rank {rank_from_env()}] FAILED {report.nodeid} ({report.when}): {tail}\n")
        sys.stderr.flush()


def start_live(config, st: RunState) -> None:
    """The live line, with pytest's terminal output redirected above it."""
    tr = config.pluginmanager.getplugin("terminalreporter")
    if tr is None:
        return
    live = progress.LiveLine(st.tty, st.total)
    st.live, st.saved_tw = live, terminal.redirect(tr, live.stream, like_current=True)
    live.start()


def stop_live(config) -> None:
    """Erase the live line and give pytest its terminal back (idempotent: session end, unconfigure)."""
    st = state(config)
    live = st.live if st is not None else None
    if live is None:
        return
    st.live = None
    pending = live.stop()
    tr = config.pluginmanager.getplugin("terminalreporter")
    if tr is not None:
        terminal.restore(tr, st.saved_tw, pending)  # a partial line of dots, through the writer that tracks it


def after_case(item, nextitem) -> None:
    """Rank 0: the live line moves on; or, in plain mode, every SUITE_PROGRESS_S seconds (default 30)
    a line with cases done of total and the time left (suite/common/progress.py)."""
    config = item.config
    st = state(config)
    if st is None or st.rank != 0:
        return
    st.done += 1
    if st.live is not None:
        st.live.update(done=st.done)
    if st.progress_mode != "plain":
        return
    now = time.time()
    if nextitem is None or now - st.progress_last < st.progress_every_s:
        return
    st.progress_last = now
    tr = config.pluginmanager.getplugin("terminalreporter")
    capman = config.pluginmanager.getplugin("capturemanager")
    if tr is not None and capman is not None:
        with capman.global_and_fixture_disabled():  # teardown runs under capture; live-log does the same
            tr.write("\n")  # off the line of dots
            tr.write_line(progress.plain_line(st.done, st.total, now - st.progress_t0))


def summary(terminalreporter, config) -> None:
    """Rank 0: the tables and the phase line into ``<run>/tables.txt``, and on the terminal where TABLES=1 asks
    for them or the run has no results folder (the launcher's summary ends a run: suite/report/run_end.py);
    pytest-benchmark's table only on request."""
    st = state(config)
    if st is None or st.rank != 0:
        return
    recs = st.records
    results_dir = config.option.results_dir
    if recs:
        text = format_tables(recs) + phases.summary_line(st.phases.breakdown(time.time() - st.started_unix)) + "\n"
        shown = st.cfg.tables or not results_dir
        if results_dir:
            try:
                write_text_atomic(os.path.join(results_dir, results.TABLES_FILE), text)
            except OSError as e:  # the tables are still in bench.json (python -m suite.report) and the report
                terminalreporter.write_line(f"warning: {e}; the tables follow here instead")
                shown = True
        if shown:
            terminalreporter.write_line("")
            terminalreporter.write(text)
    if not config.option.show_benchmark_table:
        bs = bench_adapter.session(config)
        if bs is not None:
            bs.groups = None
