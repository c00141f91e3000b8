"""A fresh tiny run through the launcher ends with its report and shows progress on rank 0."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from suite import results
from tests.conftest import run_suite


@pytest.mark.slow
def test_fresh_run_writes_report_and_progress(tmp_path):
    """Also when a case fails: the report is written, shows the failure, and the bench's
    exit status stays the ranks' (1)."""
    r = run_suite(
        tmp_path,
        "--experiments",
        "collectives",
        "--max-bytes",
        "4K",
        "--iters",
        "5",
        "--",
        "-k",
        "all_reduce and sum or all_gather_into_tensor",
        timeout=240,
        env={"SUITE_REPORT": "1", "SUITE_PROGRESS_S": "0", "SUITE_INJECT_CORRUPTION": "all_gather_into_tensor"},
    )
    assert r.returncode == 6, r.stdout[-3000:] + r.stderr[-3000:]  # EXIT_WRONG_RESULT
    m = re.search(r"^# report: (.+index\.html)$", r.stdout, re.M)
    assert m, r.stdout[-2000:]
    page = Path(m.group(1))
    if not page.is_absolute():
        page = Path(__file__).resolve().parents[2] / page
    assert page == tmp_path / "results" / "run" / "report" / "index.html" or page.samefile(
        tmp_path / "results" / "run" / "report" / "index.html"
    )
    recs = results.records(results.load_run(tmp_path / "results" / "run"))
    pngs = list(page.parent.glob("*.png"))
    assert len(pngs) == len({r["variant"] for r in recs}) == 2
    assert (page.parent / "report.md").exists() and (page.parent / "results.csv").exists()
    html = page.read_text()
    assert "all_gather_into_tensor" in html and "FAILED" in html and "exit status 6" in html
    # rank 0 reports cases done of total and the time left (every case here: SUITE_PROGRESS_S=0)
    done = re.findall(r"^# progress: (\d+)/(\d+) cases, \S+ elapsed, ~\S+ left$", r.stdout, re.M)
    assert done and int(done[0][0]) == 1 and int(done[-1][0]) == int(done[-1][1]) - 1
