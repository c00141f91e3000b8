"""The fail-slow bench's smoke, through the command users type: ``make failslow-bench`` with a trial of the local
class that the watch names on this loaded 2-core machine as on an idle one, ``slow`` (named right, after its
onset), and a clean trial (flagged for nothing), scored into failslow.json, its table and its confusion-matrix
picture. The e2e tier: 57 to 81 s a run in its 20-round soak at a load of 1 to 8, two launches and their steps.

The clean trial is what the detector's floor in seconds is for (suite/watch/detect.py ``jitter``): its compute
sits near an 8 ms floor, and for seconds at a time the load holds one rank at 9 to 25 ms beside its peer at the
floor, a 2.3x ratio of two tiny times that the ratio tests and the rank-sum test alone named in 1 of 14 rounds.

Its trials time and watch the DDP step only (mk/failslow.mk sets DDP_TIMED_ONLY=1: no reference steps, no baseline
steps), so a trial is its launch and its timed steps. Those fill FAILSLOW_BUDGET_S at the first steps' speed; the
injection starts 5 s into them (the injector's anchor: the first timed step, however long the start took), after
the 28 points of past a flag's onset needs (suite/watch/detect.py MIN_BEFORE: up to 4 s at 150 ms a point), and
lasts 20 s, over most of the steps left where those are 4 or more times slower: the rank-sum test's slowed steps, at
the step times they make, have come by then (6 to 16 s after the onset in 9 rounds at a load of 6 to 22). ``slow`` lets
the rank run 1/10 of every 50 ms, its duty cycle from a real-time thread (on time under load).

Left out, each of them named in some trials only on this machine:

- ``cpu`` (a CFS quota): 0.05 CPU slows the step 4 to 11 times, too few points for the rank-sum test before the
  stretch ends (named 16 to 20 s after the onset, missed in 2 of 6 rounds); 0.1 CPU does not bind where a process
  gets about 1/8 of a core (a load of 17 or more: missed in 2 of 3 rounds). (Those rounds also met a lopsided
  start, one rank slower for 2 s, which the detector's CUSUM then waited on past the onset; it no longer does:
  tests/unit/test_watch_detect.py, the early lopsided stretch.)
- ``pause``: its detector needs 4 pauses in the rank's compute within 96 points (after 48 with none); a pause that
  lands in the rank's wait at the all-reduce, or before its forward, holds both ranks alike, and here the rank's
  compute is under half of its time, so a short trial's 5 to 9 pauses name it in some trials only.
- ``noisy`` and ``membw``: on local ranks that share every core, their processes slow every rank alike (nothing to
  name); they are classes of a node's own cores."""

from __future__ import annotations

import json

import pytest

from tests.conftest import make

pytestmark = pytest.mark.slow

SMOKE = {
    "slow:1:5:10:20": "rank 1",  # rank 1 runs 5 ms of every 50 ms for 20 s
    "none": None,
}
"""Each trial's class spec (INJECT's syntax) and the target the watch must name first after its onset."""
BUDGET = ["FAILSLOW_BUDGET_S=14", "FAILSLOW_ITERS=700"]
"""The steps of a trial: as many as fill 14 s at the first steps' speed (tens of ms each), at most 700. At 10 s a
trial whose first steps ran under a load spike took 4.9 s in all, and the injection's onset at 5 s fell after it
(the trial void, 1 round in 20 at a load of 6 to 13): at 14 s the steps must run 2.8 times faster than the first
ones for that."""


def test_the_bench_names_a_slowed_rank_right_and_flags_nothing_on_a_clean_trial(tmp_path):
    specs = ",".join(SMOKE)
    knobs = [f"TRIALS={len(SMOKE)}", "FAILSLOW_CYCLE=1", f"FAILSLOW_CLASSES={specs}", *BUDGET]
    r = make("failslow-bench", *knobs, f"RESULTS={tmp_path}", "RUN_ID=bench", timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = tmp_path / "bench"
    doc = json.loads((out / "failslow.json").read_text())
    assert doc["complete"] and len(doc["trials"]) == len(SMOKE)
    for (spec, want), t in zip(SMOKE.items(), (t["watch"] for t in doc["trials"])):
        seen = f"{spec}: {t}"
        assert t["void"] is None, seen
        if want is None:
            assert t["inject"] is None and t["flags"] == [], seen
            continue
        assert t["inject"] == spec and t["step_slowdown"] >= 0.1, seen
        after = [f for f in t["flags"] if f["raised_s"] >= t["onset_s"]]
        assert after and min(after, key=lambda f: f["raised_s"])["target"] == want, seen
    score = doc["scores"]["watch"]["all"]
    assert (score["found"], score["positives"], score["false_positive_trials"]) == (1, 1, 0)
    assert score["localisation"]["value"] == 1.0
    assert "| watch: all | 2 | 1 / 1 / 0 |" in (out / "failslow.md").read_text()
    assert (out / "confusion-watch.png").read_bytes()[:4] == b"\x89PNG"
    # the trials ran without the DDP case's reference and baseline steps: timed only, and said so
    record = json.loads((out / "trials" / "t001" / "bench.json").read_text())["benchmarks"][0]["extra_info"]
    assert record["checked"] is False and "DDP_TIMED_ONLY=1" in record["unchecked_reason"]
    assert "solo_step_ms" not in record and "slowdowns" in record
