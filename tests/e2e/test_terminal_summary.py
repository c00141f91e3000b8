"""A run ends with a short summary, not with its tables: the headline, the verdict, wrong and unchecked counts,
where the time went and the report and trace paths, at most 10 lines after pytest's own; the nccl-tests-style
tables go to ``<run>/tables.txt`` (and the report), and ``TABLES=1`` prints them in the terminal too."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY_SIZE, run_suite

pytestmark = pytest.mark.slow

ONE_CASE = ("--experiments", "collectives", *TINY_SIZE, "--iters", "3", "--warmup", "1")
K = "all_reduce and sum and float32 and inplace"


def summary_block(stdout: str) -> list[str]:
    """The lines after pytest's last line (``1 passed in 0.52s``)."""
    lines = stdout.rstrip("\n").splitlines()
    last = max(i for i, line in enumerate(lines) if re.search(r"\b(passed|failed)\b.* in [\d.]+s", line))
    return lines[last + 1 :]


def test_a_run_ends_with_a_short_summary_and_keeps_its_tables_in_a_file(tmp_path):
    proc = run_suite(tmp_path, *ONE_CASE, "--", "-k", K, env={"SUITE_REPORT": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "results" / "run"
    block = summary_block(proc.stdout)
    assert 5 <= len(block) <= 10, block
    text = "\n".join(block)
    assert re.search(r"^# verdict: PASS: 1 case, 0 wrong, 0 unchecked", text, re.M), text
    said = r"^# collectives: all_reduce \(sum, float32\) reaches [\d.]+ (?:GB|MB|B)/s busbw"
    assert re.search(said, text, re.M), text
    assert re.search(r"busbw (?:\[[^]]*\] )?at 96 B", text), text
    assert re.search(r"^# time: \d+ s from start to report; rank 0: \w+ [\d.]+ s \(\d+%\)", text, re.M), text
    report = re.search(r"^# report: (\S+)", text, re.M)
    assert report and Path(report.group(1)) == run_dir / "report" / "index.html" and Path(report.group(1)).is_file()
    trace = re.search(r"^# trace: (\S+)", text, re.M)
    assert trace and Path(trace.group(1)).is_file(), text
    tables = run_dir / "tables.txt"
    assert re.search(rf"^# tables: {re.escape(str(tables))} \(TABLES=1 prints them here\)", text, re.M), text
    # the nccl-tests-style table is in the file, unchanged, and not in the terminal
    kept = tables.read_text()
    assert "# all_reduce  (gloo, cpu, 2 ranks, timing=blocking, 3 iters)" in kept and "# Avg bus bandwidth" in kept
    assert "# Avg bus bandwidth" not in proc.stdout and "time by phase" in kept


def test_tables_1_prints_the_tables_in_the_terminal_too(tmp_path):
    venv = tmp_path / "venv"  # this interpreter's environment as make's VENV, marked installed
    venv.mkdir()
    for entry in Path(sys.prefix).iterdir():
        if entry.name != ".installed":
            (venv / entry.name).symlink_to(entry)
    (venv / ".installed").touch()
    make = ["make", "-s", "--no-print-directory", f"VENV={venv}", "bench-cpu", "NPROC=2", "TABLES=1"]
    knobs = ["EXPERIMENTS=collectives", "MIN_BYTES=96", "MAX_BYTES=96", "ITERS=3", "WARMUP=1"]
    where = [f"RESULTS={tmp_path / 'results'}", "RUN_ID=run", f"K={K}"]
    proc = subprocess.run(
        [*make, *knobs, *where],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SUITE_REPORT": "0"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "# all_reduce  (gloo, cpu, 2 ranks, timing=blocking, 3 iters)" in proc.stdout
    assert "# Avg bus bandwidth" in proc.stdout
    block = summary_block(proc.stdout)
    assert len(block) <= 10 and "# Avg bus bandwidth" not in "\n".join(block), block
    assert (tmp_path / "results" / "run" / "tables.txt").is_file()
