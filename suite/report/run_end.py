"""The run's last lines in the terminal, at most MAX_LINES (the launcher prints them once the ranks have ended and
the report is written): the verdict with the wrong and unchecked counts, each experiment's headline
(suite/report/headline.py), where the time went, and where the results, tables, report and trace are. The
tables themselves are in ``<run>/tables.txt`` and the report, and in the terminal with TABLES=1. Reads the
stored run only."""

from __future__ import annotations

import time
from pathlib import Path

from suite import results
from suite.metrics import phase_parts
from suite.report.headline import Headline, headline_items

MAX_LINES = 10
"""The summary's most lines: verdict, headlines, time, results, tables, report, trace."""
TOP_PHASES = 3
"""The phases the time line names, largest first."""


def verdict_line(run: dict, status: int, items: list[Headline]) -> str:
    """``verdict: PASS: 34 cases, 0 wrong, 1 unchecked; exit status 0 (every case ran and was correct)``; the word
    is PASS, FINDING (a health check's), INTERRUPTED (SIGINT/SIGTERM: the cases kept) or FAIL."""
    from suite.common.failures import EXIT_FINDING, EXIT_SIGINT, EXIT_SIGTERM, MEANING

    n = sum(h.n_cases for h in items)
    wrong = sum(h.n_wrong for h in items)
    unchecked = sum(h.n_unchecked for h in items)
    interrupted = status in (EXIT_SIGINT, EXIT_SIGTERM)  # Ctrl-C or a stop: the cases kept, no failure
    word = "PASS" if status == 0 else "FINDING" if status == EXIT_FINDING else "INTERRUPTED" if interrupted else "FAIL"
    partial = "" if interrupted or (run.get("suite") or {}).get("complete") else " (partial run)"
    return (
        f"verdict: {word}{partial}: {n} case{'s' if n != 1 else ''}, {wrong} wrong, {unchecked} unchecked; "
        f"exit status {status} ({MEANING.get(status, 'unknown')})"
    )


def stored_status(run: dict) -> int | None:
    """The exit status the launcher stamped into the stored run (pytest's own for a run stored without it);
    None for a run still going, or one that ended before the launcher could stamp it."""
    st = run.get("suite") or {}
    status = st.get("exit_status", st.get("exitstatus"))
    return status if isinstance(status, int) else None


def stored_verdict(run: dict, items: list[Headline]) -> str:
    """``verdict_line`` of a stored run, as the terminal printed it at its end (the report's first line)."""
    status = stored_status(run)
    if status is None:
        n = sum(h.n_cases for h in items)
        return f"verdict: UNKNOWN (no exit status recorded: the run is still going, or ended early); {n} cases kept"
    return verdict_line(run, status, items)


def time_line(run: dict, now: float | None = None) -> str:
    """The run's wall time and rank 0's largest phases."""
    su = run.get("suite") or {}
    started = su.get("started_unix")
    wall = (
        f"{(now or time.time()) - started:z.0f} s from start to report"
        if isinstance(started, (int, float))
        else "wall time unknown"
    )
    phases = su.get("phase_seconds") or {}
    if not phases:
        return f"time: {wall}; no phases recorded"
    return f"time: {wall}; rank 0: {phase_parts(phases, TOP_PHASES)} of {sum(phases.values()):z.1f} s in its session"


def headline_lines(items: list[Headline], room: int) -> list[str]:
    """Up to ``room`` lines: the headlines, a wrong or unhealthy one first, then the report's order; where they
    do not fit, the last line names the ones left to the report."""
    ranked = sorted(items, key=lambda h: h.verdict in ("correct", "healthy", "unchecked"))
    if len(ranked) <= room:
        return [h.text for h in ranked]
    shown, left = ranked[: room - 1], ranked[room - 1 :]
    return [h.text for h in shown] + [f"(+{len(left)} more in the report: {', '.join(h.experiment for h in left)})"]


def end_lines(
    run: dict,
    run_dir: Path,
    *,
    status: int,
    latest: str,
    report: Path | None,
    tables_shown: bool,
    now: float | None = None,
) -> list[str]:
    """The summary, at most MAX_LINES lines, each starting ``# `` (``latest``: what became of results/latest)."""
    items = headline_items(run)
    tables = run_dir / results.TABLES_FILE
    files = [
        f"results: {run_dir / 'bench.json'} ({latest})",
        f"tables: {tables} ({'printed above' if tables_shown else 'TABLES=1 prints them here'})"
        if tables.is_file()
        else f"tables: python -m suite.report {run_dir}",
        f"report: {report}" if report is not None else f"report: not written (python -m suite.report html {run_dir})",
    ]
    trace = run_dir / "trace.json"
    if trace.is_file():
        files.append(f"trace: {trace} (Perfetto: ui.perfetto.dev, or chrome://tracing offline)")
    room = MAX_LINES - 2 - len(files)
    lines = [verdict_line(run, status, items), *headline_lines(items, room), time_line(run, now), *files]
    return [f"# {line}" for line in lines]


def print_end(run_dir: Path, *, status: int, latest: str, report: Path | None) -> None:
    """Print the stored run's summary (``end_lines``; the tables counted as shown where its config asked
    for them, TABLES=1). A summary that fails says so in one line and leaves the results as they are."""
    try:
        run = results.load_run(run_dir)
        shown = bool((((run.get("suite") or {}).get("config")) or {}).get("tables"))
        lines = end_lines(run, run_dir, status=status, latest=latest, report=report, tables_shown=shown)
    except Exception as e:  # noqa: BLE001 - like the report's, a failed summary never changes the status
        lines = [
            f"# results: {run_dir / 'bench.json'} ({latest})",
            f"# summary not written ({type(e).__name__}: {e}); python -m suite.report {run_dir} has the tables",
        ]
    print("\n".join(lines), flush=True)
