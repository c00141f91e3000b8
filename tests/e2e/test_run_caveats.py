"""What can make a run's numbers mean less than they seem is said out loud: ranks that outnumber the cores
(before any rank starts, in machine_info and in the report), a precision target the cases missed (per case and
in the summary, with the iterations that ran) and the machine's load (recorded, and named as the likely cause
of unstable cases when it exceeded the cores).

The run: 2 ranks under ``taskset -c 0`` (one usable core: oversubscribed for real), a precision target no case
can reach in its time cap, two tiny cases. The report tests read stored JSON: the committed fixture run with
the recorded fields set as a run of each kind stores them."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys

import pytest

from suite import metrics, results
from suite.report import environment, summary
from tests.conftest import ROOT, TINY_SIZE, launch_command, tables_of

FIXTURE = ROOT / "tests" / "fixtures" / "collectives-gloo-2"


@pytest.fixture(scope="module")
def pinned_run(tmp_path_factory):
    """``taskset -c 0 python -m suite.launch --nproc 2 ... --precision-pct 0.01`` with its report."""
    if shutil.which("taskset") is None:
        pytest.skip("no taskset (util-linux) on this host")
    tmp = tmp_path_factory.mktemp("pinned")
    cmd = launch_command(
        tmp,
        "--experiments",
        "collectives",
        *TINY_SIZE,
        "--iters",
        "5",
        "--warmup",
        "1",
        "--precision-pct",
        "0.01",
        "--max-time-s",
        "1",
        "--",
        "-k",
        "all_reduce-sum or barrier",
    )
    env = {**os.environ, "SUITE_REPORT": "1", "SUITE_PROGRESS": "off"}
    proc = subprocess.run(["taskset", "-c", "0", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp / "results" / "run"
    return proc, results.load_run(run_dir), (run_dir / "report" / "report.md").read_text()


def _summary(md: str) -> dict[str, str]:
    """The report's summary and environment rows, name -> finding (from report.md)."""
    return dict(re.findall(r"^\| ([^|]+?) \| (.+) \|$", md, re.M))


@pytest.mark.slow
def test_ranks_beyond_the_cores_are_said_before_the_ranks_start_and_kept_in_the_record(pinned_run):
    proc, run, md = pinned_run
    lines = proc.stdout.splitlines()
    warned = [
        i for i, line in enumerate(lines) if line.startswith("# warning: CPU oversubscribed: 2 ranks on 1 usable")
    ]
    assert len(warned) == 1, proc.stdout[-3000:]  # once, right after the run's first line: no rank has printed yet
    assert lines[warned[0] - 1].startswith("# run run: 1 node(s) x 2 rank(s)")
    assert "DDP's scaling efficiency" in lines[warned[0]] and "small-message latency" in lines[warned[0]]
    (host,) = run["machine_info"]["suite"]["hosts"].values()
    assert host["cpu_share"] == {"ranks": 2, "threads_per_rank": 1, "usable_cpus": 1, "oversubscribed": "ranks"}
    assert host["cpus_allowed"] == "0"
    row = _summary(md)["CPU oversubscribed"]
    assert row.startswith("2 ranks on 1 usable core: ") and "not communication" in row


@pytest.mark.slow
def test_a_missed_precision_target_is_reported_per_case_with_the_iterations_that_ran(pinned_run):
    proc, run, md = pinned_run
    recs = results.records(run)
    assert len(recs) == 2 and all(r["precision_reached"] is False and r["precision_ci_pct"] > 0.01 for r in recs)
    rows = _summary(md)
    assert rows["precision"].startswith("target ±0.01% MISSED by 2 of 2 cases (MAX_TIME_S=1 s per case ended them)")
    counts = sorted({r["iterations"] for r in recs})
    ran = f"{counts[0]}-{counts[-1]}" if len(counts) > 1 else str(counts[0])
    assert f" {ran} iterations ran" in rows["precision"]
    if counts != [5]:  # the loop took more than ITERS: the config row shows what ran, not ITERS alone
        assert f"iters={ran} ran (ITERS=5 asked, PRECISION decided)" in rows["config"]
    assert "# PRECISION target missed by 2 of 2 cases" in tables_of(proc)  # under the tables, naming the cases
    # how well the medians are known comes from the data (the widest CI, rounded up), never from the threshold:
    # a run that missed its target may not claim the threshold's ±10% (CI widths vary from run to run)
    widest = max(results.median_ci_pct(r) for r in recs)
    if widest > summary.UNSTABLE_CI_PCT:
        assert re.match(r"[12] of 2: the median is uncertain by more than ±10%", rows["unstable cases"])
    else:
        known = f"none: every median is known to ±{math.ceil(widest * 10) / 10:z.1f}% or better (95% CI)"
        assert rows["unstable cases"] == known


@pytest.mark.slow
def test_the_load_average_is_recorded_at_the_start_and_through_the_run(pinned_run):
    _, run, md = pinned_run
    su = run["machine_info"]["suite"]
    (host,) = su["hosts"].values()
    assert len(host["load_avg_start"]) == 3 and all(x >= 0 for x in host["load_avg_start"])
    during = su["load_avg_run"]
    assert len(during["end"]) == 3 and during["samples"] >= 3 and during["peak_1min"] >= during["end"][0]
    (env_row,) = [v for k, v in _summary(md).items() if k.startswith("host ")]
    assert "load average (1/5/15 min) " in env_row and " at the end" in env_row


# --- the report, from stored runs -----------------------------------------------------------------------


def _stored(tmp_path, edit) -> dict[str, str]:
    """The fixture run as ``edit(run)`` leaves it, its report written by the report CLI; the summary rows."""
    run = _broadcasts()
    edit(run)
    d = tmp_path / "run"
    d.mkdir()
    (d / "bench.json").write_text(json.dumps(run))
    r = subprocess.run(
        [sys.executable, "-m", "suite.report", "html", str(d)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return _summary((d / "report" / "report.md").read_text())


def _rows(run: dict) -> dict[str, str]:
    """The summary and environment rows the report would show for ``run`` (the functions the CLI calls)."""
    return dict(summary.summary_rows(run)) | dict(environment.environment_summary(run))


def _broadcasts() -> dict:
    """The fixture run with its 4 broadcast cases alone (one figure: the report CLI takes seconds)."""
    run = json.loads((FIXTURE / "bench.json").read_text())
    run["benchmarks"] = [b for b in run["benchmarks"] if b["extra_info"]["variant"] == "broadcast"]
    return run


def _host(run: dict) -> dict:
    (h,) = run["machine_info"]["suite"]["hosts"].values()
    return h


def _loaded(load: float, ranks: int = 2):
    def edit(run):
        h = _host(run)
        h.update(ranks=list(range(ranks)), load_avg_start=[load, load, load])
        run["machine_info"]["suite"]["load_avg_run"] = {"peak_1min": load, "end": [load, load, load], "samples": 9}

    return edit


def test_unstable_cases_name_the_load_as_their_likely_cause_when_it_exceeded_the_cores(tmp_path):
    rows = _stored(tmp_path, _loaded(3.9))
    assert rows["unstable cases"].startswith("4 of 4: the median is uncertain"), rows["unstable cases"]
    assert (
        "likely cause: load average 3.9 on the host's 2 cores during the run, at most 2 of it this run's ranks: "
        "other processes competed for the CPU" in rows["unstable cases"]
    )
    assert "CPU oversubscribed" not in rows  # 2 ranks on 2 cores fit


def test_a_load_within_the_cores_is_not_named():
    run = _broadcasts()
    _loaded(1.2)(run)
    rows = _rows(run)
    assert "load" not in rows["unstable cases"]


def test_ranks_beyond_the_cores_of_a_run_stored_before_the_record_said_so(tmp_path):
    """A run stored before hosts carried ``cpu_share`` (the fixture): its ranks, affinity and threads tell."""
    rows = _stored(tmp_path, _loaded(3.9, ranks=4))
    assert rows["CPU oversubscribed"].startswith("4 ranks on 2 usable cores: ")
    assert "NPROC=2 or fewer avoids it" in rows["CPU oversubscribed"]
    assert "likely cause: this run's 4 ranks share 2 usable cores (CPU oversubscribed)" in rows["unstable cases"]


def test_precision_mode_that_missed_its_target_is_not_reported_as_known(tmp_path):
    def edit(run):
        run["suite"]["config"].update(precision_pct=2.0, iters=20, max_time_s=10.0)
        for i, b in enumerate(run["benchmarks"]):
            e = b["extra_info"]
            e["samples_us"] = [100.0 + 0.01 * j for j in range(300 + 220 * i)]  # known to well under ±10%
            e.update(iterations=len(e["samples_us"]), precision_reached=i == 0, precision_ci_pct=1.5 if i == 0 else 3.1)

    rows = _stored(tmp_path, edit)
    assert rows["precision"] == (
        "target ±2% MISSED by 3 of 4 cases (MAX_TIME_S=10 s per case ended them); they got ±3.1% (best) to "
        "±3.1%; reached by 1; 300-960 iterations ran"
    )
    assert "iters=300-960 ran (ITERS=20 asked, PRECISION decided)" in rows["config"]
    # the widest CI there is, as precision mode judged it: not the ±10% threshold
    assert rows["unstable cases"] == "none: every median is known to ±3.1% or better (95% CI)"


def test_the_claim_of_known_medians_comes_from_the_data():
    run = _broadcasts()
    for b in run["benchmarks"]:
        b["extra_info"]["samples_us"] = [100.0 + 0.1 * j for j in range(40)]
    rows = _rows(run)
    widest = metrics.median_ci_halfwidth_pct([100.0 + 0.1 * j for j in range(40)])
    bound = math.ceil(widest * 10) / 10  # rounded up: the claim holds
    assert rows["unstable cases"] == f"none: every median is known to ±{bound:z.1f}% or better (95% CI)"
    assert widest < 10 and summary.UNSTABLE_CI_PCT == 10.0
