"""Real runs of the same commit compared as users compare them.

`make bench-cpu REPEAT=2` of every experiment (2 ranks, Gloo, tiny sizes and few iterations, small DDP and
model-parallel models, the sharded strategies that fit 2 ranks) makes the runs ``t-r1``, ``t-r2``. Compared one to
one they must match every case of each side (none only in base or only in new: a case's identity is what its record
declares, never a measurement such as peak memory or the size the p2p experiment's deadlock probe found), and the
comparison says it had one run per side. `make bench-cpu REPEAT=5` of the collectives experiment at 1 KiB (the cheap
runs, ``c-r1`` .. ``c-r5``: the gate's statistics are the same for every experiment's cases) makes the A/B design
for two commits: interleaved sides (r1, r3 vs r2, r4) must call no case slower or faster and the gate must not FAIL:
on this shared machine most cases are *inconclusive* at a 5% tolerance, and the gate says so and how many runs would
resolve them. The fifth run, with a planted slowdown of every all_reduce case against the four: the slowdown is found
and the gate FAILs (each case's noise is the four base runs' spread; one planted run is enough for a slowdown of
hundreds of times). The slowdown is planted in the fifth run's records: 0.5 s added to each timed all_reduce, what
``SUITE_INJECT_DELAY=1:0.5:all_reduce`` (rank 1 sleeps 0.5 s after every timed all_reduce) puts in a run's records
(tests/dist/test_harness_dist.py shows a delay after an op held in every sample), without a launch of its own and
its 12 s of sleeps (a planted run took ~23 s, a cheap one ~8 s). The two runs of every experiment take about a minute
on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from suite import results

from suite.report import compare, cli as report
import suite.report.compare.case_identity as case_identity

from suite.launch import cli as launch
from tests.conftest import make
from experiments.sharded import strategies

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KNOBS = [
    "NPROC=2",
    "EXPERIMENTS=all",
    "MIN_BYTES=1K",
    "MAX_BYTES=2K",
    "ITERS=5",
    "WARMUP=1",
    "DDP_PARAMS=50K",
    "DDP_BATCH=8",
    "MP_IN=64",
    "MP_OUT=64",
    "MP_BATCH=8",
    # the strategies whose mesh fits 2 ranks: one that needs more (2d) makes each run start a second pass for it,
    # ~10 s a run, whose oversubscribed records the comparison leaves out (compare.gated_records) anyway
    "SHARDED_STRATEGIES=" + ",".join(n for n, s in strategies.STRATEGIES.items() if not s.mesh_cannot(2)),
]


def _make(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return make(*args, timeout=timeout, env={**os.environ, "SUITE_REPORT": "0", "OMP_NUM_THREADS": "1"})


CHEAP = [k for k in KNOBS if not k.startswith(("EXPERIMENTS=", "MAX_BYTES="))] + [
    "EXPERIMENTS=collectives",
    "MAX_BYTES=1K",
]
"""The runs the gate's A/B design (``c-r1`` .. ``c-r4``) and the planted slowdown (``c-r5``) are made of: the
collectives experiment at 1 KiB (a launch's cost, mostly: the gate treats every experiment's cases alike, what ``t``
proves matched)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    res = tmp_path_factory.mktemp("cmp") / "results"
    proc = _make("bench-cpu", "REPEAT=2", "RUN_ID=t", f"RESULTS={res}", *KNOBS, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "# 2 runs:" in proc.stdout
    proc = _make("bench-cpu", "REPEAT=5", "RUN_ID=c", f"RESULTS={res}", *CHEAP, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "# 5 runs:" in proc.stdout
    return res


def test_repeat_makes_k_runs_and_a_side_names_them(runs):
    assert [Path(p).name for p in report.run_set(str(runs / "c"))] == ["c-r1", "c-r2", "c-r3", "c-r4", "c-r5"]
    assert [Path(p).name for p in report.run_set(str(runs / "t"))] == ["t-r1", "t-r2"]
    assert report.run_set(f"{runs / 't-r2'},{runs / 't-r1'}") == [
        str(runs / "t-r2"),
        str(runs / "t-r1"),
    ]
    for r in ("t-r1", "t-r2", "c-r1", "c-r2", "c-r3", "c-r4", "c-r5"):
        run = results.load_run(runs / r)
        assert run["suite"]["complete"] is True


def _gated(runs, run: str) -> list[dict]:
    # what the gate compares: not the oversubscribed pass (the 2-D mesh at 4 ranks), nor the link probe's steps
    return compare.gated_records(results.records(results.load_run(runs / run)))


def _sides(runs) -> tuple[list[list[dict]], list[list[dict]]]:
    return [_gated(runs, "c-r1"), _gated(runs, "c-r3")], [_gated(runs, "c-r2"), _gated(runs, "c-r4")]


def test_every_case_of_every_experiment_is_matched(runs):
    a, b = _gated(runs, "t-r1"), _gated(runs, "t-r2")
    assert {r["experiment"] for r in a} == set(launch.all_experiments())
    c = compare.compare_records(a, b)
    assert not c.only_base and not c.only_new, [case_identity.describe_key(k) for k in c.only_base + c.only_new]
    assert len(c.cases) == len(a) == len(b)  # nothing dropped, not even a case with no positive time
    assert {dict(k)["experiment"] for k in (x.key for x in c.cases)} == set(launch.all_experiments())
    assert c.base_runs == c.new_runs == 1 and "one run per side" in c.between_run_note


STORED = ROOT / "tests" / "fixtures" / "all-gloo-2"
"""A run of every experiment made with KNOBS at 8e9fe02, before the experiments became folders (issue 25):
runs stored before a restructuring must compare with runs after it, case for case."""


def test_a_run_stored_before_the_restructuring_matches_every_case(runs):
    stored = results.records(results.load_run(STORED))
    now = _gated(runs, "t-r1")
    stored_experiments = {r["experiment"] for r in stored}
    now = [r for r in now if r["experiment"] in stored_experiments]  # an experiment added since: new cases
    c = compare.compare_records(stored, now)
    assert not c.only_base and not c.only_new, [case_identity.describe_key(k) for k in c.only_base + c.only_new]
    assert len(c.cases) == len(stored) == len(now)
    assert {dict(x.key)["experiment"] for x in c.cases} == stored_experiments
    assert len(stored_experiments) == 6  # every experiment of EXPERIMENTS=all at 8e9fe02


IDENTITY_ALPHA = 0.001
"""The identity checks test the comparison at a 0.1% family-wise level: alpha is the level of the case
verdicts (the intervals are simultaneous at 1 - alpha), so at the default 5% a correct procedure calls
some case of one commit slower or faster in up to 1 comparison in 20, by design, and a test may not
fail 1 in 20."""


def test_interleaved_runs_of_one_commit_call_no_case_slower_or_faster(runs):
    base, new = _sides(runs)
    c = compare.compare_runs(base, new, alpha=IDENTITY_ALPHA)
    assert c.base_runs == c.new_runs == 2 and "from the runs' medians" in c.between_run_note
    assert not c.only_base and not c.only_new and len(c.cases) == len(base[0])
    assert {dict(x.key)["op"] for x in c.cases} >= {PLANTED, "all_gather", "broadcast"}
    flagged = [
        (case_identity.describe_key(x.key), round(x.ratio, 2), round(x.ci_low, 2), round(x.ci_high, 2))
        for x in c.cases
        if x.verdict in ("slower", "faster")
    ]
    assert not flagged, flagged
    assert c.overall != "slower" and not c.failed, (c.overall_ratio, c.overall_ci)
    assert all(x.runs_needed for x in c.inconclusive)  # each undecided case says what would decide it


def test_make_compare_of_interleaved_runs_does_not_fail(runs):
    r = lambda i: str(runs / f"c-r{i}")  # noqa: E731
    proc = _make("compare", f"BASE={r(1)},{r(3)}", f"NEW={r(2)},{r(4)}", f"ALPHA={IDENTITY_ALPHA}", timeout=120)
    out = proc.stdout
    assert "(2 run(s))" in out and "unmatched" not in out and "settings differ" not in out, out[-3000:]
    assert "gate: FAIL" not in out, out[-3000:]
    # PASS (exit 0), or INCONCLUSIVE (the CLI's 3, which make reports as its 2) with the reason and the runs
    assert (proc.returncode, "gate: PASS" in out) in ((0, True), (2, False)), proc.stderr[-2000:] + out[-3000:]
    if proc.returncode:
        assert re.search(r"gate: INCONCLUSIVE .*could not be judged|gate: INCONCLUSIVE .*straddles", out), out[-2000:]
    m = re.search(r"# (\d+) matched case\(s\): 0 slower, 0 faster, (\d+) same, (\d+) inconclusive", out)
    assert m and int(m.group(1)) == int(m.group(2)) + int(m.group(3)), out[-3000:]
    assert int(m.group(1)) == len(_gated(runs, "c-r1"))


PLANTED = "all_reduce"


DELAY_US = 500_000
"""The planted slowdown: 0.5 s in every timed all_reduce sample."""


@pytest.fixture(scope="module")
def planted_runs(runs):
    """``results/slow``: the fifth cheap run with ``DELAY_US`` added to every sample of every all_reduce case, as a
    run with rank 1 sleeping 0.5 s after every timed all_reduce records it (a sample is the slowest rank's time)."""
    slow = runs / "slow"
    shutil.copytree(runs / "c-r5", slow)
    run = json.loads((slow / "bench.json").read_text())
    planted = [r for r in results.records(run) if r["op"] == PLANTED]
    for rec in planted:
        rec["samples_us"] = [x + DELAY_US for x in rec["samples_us"]]
        rec.update({k: rec[k] + DELAY_US for k in results.TIME_STATS if rec.get(k) is not None})
    assert len(planted) >= 5  # every redop of all_reduce
    (slow / "bench.json").write_text(json.dumps(run))
    return runs


def test_a_planted_slowdown_of_one_op_is_found_among_runs_of_one_commit(planted_runs):
    base_runs = ",".join(str(planted_runs / f"c-r{i}") for i in range(1, 5))
    proc = _make("compare", f"BASE={base_runs}", f"NEW={planted_runs / 'slow'}", timeout=120)
    out = proc.stdout
    assert proc.returncode == 2 and "gate: FAIL (regression:" in out, proc.stderr[-2000:] + out[-3000:]
    assert "(4 run(s))" in out and "(1 run(s))" in out and "settings differ" not in out, out[-3000:]
    base = [results.records(results.load_run(planted_runs / f"c-r{i}")) for i in range(1, 5)]
    new = [results.records(results.load_run(planted_runs / "slow"))]
    c = compare.compare_runs(base, new)
    planted = [x for x in c.cases if dict(x.key)["op"] == PLANTED]
    others = [x for x in c.cases if dict(x.key)["op"] != PLANTED]
    assert len(planted) >= 5 and len(others) >= 20  # every redop of all_reduce; the other collectives
    # the base's all_reduce medians vary up to 15x between runs on a loaded 2-core machine, so a 30-60x
    # slowdown (a 0.1 s delay) was inconclusive in 4 of 5 cases: 0.5 s is 150-2500x
    found = [case_identity.describe_key(x.key) for x in planted if x.verdict == "slower"]
    assert found, [(case_identity.describe_key(x.key), x.ratio, x.ci_low, x.verdict) for x in planted]
    # the planted cases are the slowed ones (not a machine busier while the planted runs ran)
    assert min(x.ratio for x in planted) > 3 * float(np.median([x.ratio for x in others]))
    strict = compare.compare_runs(base, new, alpha=IDENTITY_ALPHA)
    assert not [x.key for x in strict.cases if dict(x.key)["op"] != PLANTED and x.verdict == "slower"]
