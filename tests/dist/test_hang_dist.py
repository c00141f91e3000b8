"""A hung or diverged run names the rank, the op and the line (suite/harness/journal/, suite/postmortem/hang.py),
through the launcher users run, on real Gloo groups: each kind of divergence is planted on rank 1 inside the
timed iterations of the second case (SUITE_INJECT_DIVERGE, suite/harness/runner.py), with TIMEOUT_S=3: each launch
waits that long for the op left waiting, and 3 s is the shortest heartbeat (which follows TIMEOUT_S up to 15 s)
that tells a busy rank from a lost one (HEARTBEAT_S).

What each run must show: the exit status (9 for a divergence, never 5 "a peer was lost" for a rank
that is alive), the one-line verdict naming rank 1 (or, for a size mismatch that Gloo aborts on, the
rank that died and what the others waited in), the diagnosis in failures/, and the first case kept.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, all_correct, run_suite, small_run
from tests.trace_checks import check_trace, load_trace, ops

pytestmark = pytest.mark.slow

TIMEOUT_S = 3
# two cases (256 B, 1 KiB) of 1 warm-up + 5 timed calls: call 9 is the 2nd timed one of the 2nd case
TWO_SIZES = small_run("all_reduce-sum", timeout_s=TIMEOUT_S)

PLANTS = {
    # action: (ranks, exit status, what the verdict says)
    "skip": (
        2,
        9,
        r"rank 0 waits in all_reduce #\d+ \[256\] \(case [^)]+\); rank 1 issued a different op there \([^)]+\): "
        r"rank 1 is in barrier #\d+ at suite/harness/timing\.py:\d+ in _run_samples",
    ),
    "other": (
        2,
        9,
        r"rank 0 waits in all_reduce #\d+ \[256\] .*; rank 1 issued a different op there \([^)]+\): "
        r"rank 1 is in broadcast #\d+ \[1\] at suite/harness/runner\.py:\d+ in diverge",
    ),
    "sleep": (
        2,
        9,
        r"rank 0 waits in all_reduce #\d+ \(case .*\); rank 1 never entered it: "
        r"rank 1 at suite/harness/runner\.py:\d+ in diverge",
    ),
    "recv": (
        2,
        9,
        r"rank 0 waits in all_reduce #\d+ \[256\] .*; rank 1 issued a different op there \([^)]+\): "
        r"rank 1 is in recv #\d+ \(peer 0\) \[1\] at suite/harness/runner\.py:\d+ in diverge",
    ),
    "stray": (2, 9, r"rank 1 waits in all_reduce #\d+ .*; rank 0 never entered it"),
    # Gloo aborts (SIGABRT) on the size mismatch; the rings of the ranks it aborted say what they issued
    "size": (3, 9, r"; rank 1 issued a different size there \([^)]+\): rank 1 (died|is) in all_reduce #\d+ \[257\]"),
}


@pytest.mark.parametrize("action", list(PLANTS))
def test_a_planted_divergence_is_named(tmp_path, action):
    nproc, status, verdict = PLANTS[action]
    t0 = time.monotonic()
    env = {"SUITE_INJECT_DIVERGE": f"{action}:1:9"}
    if action == "sleep":  # torch's flight recorder on (NCCL runs have it; Gloo fills it too): its dumps are read
        env["TORCH_FR_BUFFER_SIZE"] = "2000"
    proc = run_suite(tmp_path, *TWO_SIZES, nproc=nproc, env=env, timeout=120)
    took = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode in (status if isinstance(status, tuple) else (status,)), out[-4000:]
    run_dir = tmp_path / "results" / "run"
    diag = json.loads((run_dir / "failures" / "hang.json").read_text())
    assert diag["verdict"] == diag["verdict"].strip() and "\n" not in diag["verdict"]
    assert re.search(verdict, diag["verdict"]), diag
    assert f"# hang diagnosis: {diag['verdict']}" in out  # the launcher's last lines say it
    assert (run_dir / "failures" / "hang.txt").read_text().count("\n") >= 2  # per-rank lines and the verdict
    if status == 9:
        assert "a peer was lost" not in out
    status = proc.returncode
    if action == "stray":  # found by the after-case check at once, not by a timeout
        n = re.search(
            r"rank 1 had issued (\d+) collective\(s\) on process group 0 where rank\(s\) 0 had issued (\d+)", out
        )
        assert n and int(n.group(1)) == int(n.group(2)) + 1, out[-4000:]
    # named within TIMEOUT_S + a few seconds of the first op left waiting (start-up excluded: this
    # machine's load makes it vary), and the whole run bounded
    waited = [
        e["time_unix"]
        for p in (run_dir / "hang").glob("rank*.json")
        for e in json.loads(p.read_text())["tail"]
        if e["state"] in ("entered", "failed")
    ]
    if waited:
        assert diag["time_unix"] - min(waited) < TIMEOUT_S + 10, diag
    assert took < 120, f"took {took:.0f} s"
    run = json.loads((run_dir / "bench.json").read_text())
    assert run["suite"]["complete"] is False and run["suite"]["exit_status"] == status
    assert run["suite"]["hang_diagnosis"] == {"kind": diag["kind"], "verdict": diag["verdict"]}  # marked
    recs = [b["extra_info"] for b in run["benchmarks"]]
    assert len(recs) == 1 and all_correct(recs), "the case measured before the divergence was lost"
    _assert_the_trace_ends_with_each_ranks_last_op(run_dir, diag)
    if action == "sleep":
        # every rank's real flight-recorder dump is in failures/, and the same diagnosis reads them
        assert sorted(p.name for p in (run_dir / "failures").glob("nccl_trace_rank_*")) == [
            "nccl_trace_rank_0",
            "nccl_trace_rank_1",
        ]
        assert re.fullmatch(
            r"rank 0 waits in all_reduce #\d+; rank 1 never entered it: "
            r"rank 1 at suite/harness/runner\.py:\d+ in diverge",
            diag["flight_recorder"] or "",
        ), diag
        assert f"# flight recorder: {diag['flight_recorder']}" in out
        _assert_the_report_shows(run_dir, diag)  # the report of the stored run leads with the diagnosis


def _assert_the_trace_ends_with_each_ranks_last_op(run_dir, diag):
    """The run's trace.json (the parts the ranks wrote, and their journals' dumps) opens with nested tracks,
    and each rank that answered ends with the op the diagnosis names for it: the divergence is on the timeline."""
    by_rank = check_trace(load_trace(run_dir / "trace.json"))
    named = {  # a rank Gloo aborted wrote no part: its row (from its ring file) is not on the timeline
        row["rank"]: row["op"].split(" (peer")[0] for row in diag["table"] if row["op"] and "died" not in row["state"]
    }
    assert named and set(named) <= set(by_rank), (named, sorted(by_rank))
    for rank, op in named.items():
        last = ops(by_rank[rank])[-1]
        assert f"{last['name']} #{last['args']['seq']}" == op, (rank, last, diag["table"])
        assert last["args"]["case"]


def _assert_the_report_shows(run_dir, diag):
    proc = subprocess.run(
        [sys.executable, "-m", "suite.report", "html", str(run_dir)], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    md = (run_dir / "report" / "report.md").read_text()
    head, _, rest = md.partition("## Hang diagnosis\n\n")
    assert rest and "## Summary" not in head, md[:2000]
    assert rest.startswith(f"**divergence**: {diag['verdict']}\n"), rest[:2000]
    rows = re.findall(r"^\| (\d+) \| [^|]+ \| (waiting|completed) \| (\w+) #\d+ \|", rest.partition("## ")[0], re.M)
    assert [(r, op) for r, _, op in rows] == [("0", "all_reduce"), ("1", "barrier")], rest[:2000]
    page = (run_dir / "report" / "index.html").read_text()
    assert "<h2 id='hang'>Hang diagnosis</h2>" in page and html.escape(diag["verdict"]) in page


# SUITE_INJECT_DIVERGE=...@below: in torch.distributed itself, k counting the rank's all_reduce calls of the one
# 256 B case (2 timed calls): 1 the support probe, 2 its agreement, 3 the check run, 4 the warm-up call, 5 and 6
# the timed ones, 7 the wrong counts' sum. Each plant is one launch (the run ends at it); rank 1 is named.
ONE_CASE = small_run("all_reduce-sum-float32", min_bytes="256", max_bytes="256", iters=2, timeout_s=TIMEOUT_S)
BELOW = {
    "skip-early-2": (2, "skip:1:3@below", "op"),
    "skip-early-3": (3, "skip:1:1@below", "size"),  # the probe: rank 1 pairs the others' [8] with its [1]
    "skip-middle-2": (2, "skip:1:5@below", "op"),
    "skip-late-2": (2, "skip:1:6@below", "op"),
    "skip-late-3": (3, "skip:1:6@below", "op"),
    "size-2": (2, "size:1:5@below", "size"),  # Gloo aborts both: their rings
    "other-3": (3, "other:1:5@below", "op"),
    "extra-3": (3, "extra:1:6@below", "op"),  # at 2, the last timed call twice reads as the other's skip
}


@pytest.mark.parametrize("plant", list(BELOW))
def test_a_divergence_below_the_harness_is_blamed_on_its_rank(tmp_path, plant):
    nproc, spec, what = BELOW[plant]
    proc = run_suite(tmp_path, *ONE_CASE, nproc=nproc, env={"SUITE_INJECT_DIVERGE": spec}, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 9, out[-4000:]
    assert "a peer was lost" not in out
    diag = json.loads((tmp_path / "results" / "run" / "failures" / "hang.json").read_text())
    assert diag["kind"] == "divergence" and f"# hang diagnosis: {diag['verdict']}" in out
    assert f"; rank 1 issued a different {what} there (" in diag["verdict"], diag["verdict"]
    assert "suite/harness/plant/below.py" not in diag["verdict"]  # the plant's own frames: where it was called from
