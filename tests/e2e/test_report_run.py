"""A fresh tiny run through the launcher ends with its report and shows progress on rank 0."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from suite import results
from tests.conftest import run_suite
from tests.trace_checks import check_trace, load_trace, ops


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
    per_op = list(page.parent.glob("collectives-*.png"))  # one figure per op, beside the run's own figures
    assert len(per_op) == len({r["variant"] for r in recs}) == 2
    assert (page.parent / "headline-busbw.png").exists() and (page.parent / "prediction-measured.png").exists()
    assert (page.parent / "report.md").exists() and (page.parent / "results.csv").exists()
    html = page.read_text()
    assert "all_gather_into_tensor" in html and "FAILED" in html and "exit status 6" in html
    # rank 0 reports cases done of total and the time left (every case here: SUITE_PROGRESS_S=0)
    done = re.findall(r"^# progress: (\d+)/(\d+) cases, \S+ elapsed, ~\S+ left$", r.stdout, re.M)
    assert done and int(done[0][0]) == 1 and int(done[-1][0]) == int(done[-1][1]) - 1
    _assert_the_timeline(tmp_path / "results" / "run", recs, html)


def _assert_the_timeline(run_dir: Path, recs: list[dict], html: str) -> None:
    """The run's trace.json opens in Perfetto: the format's rules, nested tracks, one per rank; every op the
    journal saw with its sequence number and case, inside its case, phase and (timed) sample; the report links
    it."""
    by_rank = check_trace(load_trace(run_dir / "trace.json"))
    assert sorted(by_rank) == [0, 1]
    assert not (run_dir / "trace").exists()  # the ranks' parts are in trace.json: one copy of the timeline
    for events in by_rank.values():
        seen = ops(events)
        assert seen and all(isinstance(e["args"]["seq"], int) and e["args"]["case"] for e in seen)
        assert {e["args"]["case"] for e in seen} >= {r["label"] for r in recs}  # every case's ops
        cats = {e.get("cat") for e in events}
        assert {"case", "phase", "sample", "op"} <= cats, cats
        timed = [e for e in events if e.get("cat") == "phase" and e["name"] == "timed"]
        samples = [e for e in events if e.get("cat") == "sample"]
        assert len(timed) == len(recs) and len(samples) == 5 * len(recs)  # --iters 5: one span per sample
        # each timed sample holds its op (the barrier before it is outside)
        assert all(any(s["ts"] <= o["ts"] <= s["ts"] + s["dur"] for o in seen) for s in samples)
    assert "href='../trace.json'" in html
