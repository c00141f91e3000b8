"""The fail-slow bench's smoke, through the command users type: ``make failslow-bench`` with a trial of each of two
local classes, ``slow`` and ``cpu`` (each named right, first after its onset), and a clean trial (flagged for nothing),
scored into failslow.json, its table and its confusion-matrix picture. The e2e tier: one launch of make, its trials in
turn. Soaked with a ``pause`` trial as the third (20 rounds at a 1-min load of 0.8 to 10.5, mostly 5 to 10): 126 to 212
s a round of four trials.

The clean trial is what the detector's floor in seconds (suite/watch/detect.py ``jitter``) and its rank-sum level
(``ALPHA``, 1e-6) are for: its compute sits near a 6 to 8 ms floor, and for seconds at a time the load holds one
rank at 9 to 25 ms beside its peer at the floor, a ratio of two tiny times that the ratio tests and the rank-sum test
alone named in 1 of 14 rounds, and that at a level of 3e-6 was still named in some (tests/unit/test_watch_detect.py
``CLEAN_LOADED_2``). At 1e-6 it is still named now and then under load: in that soak the clean trial was flagged in 2
of 20 rounds (rank 1 2.9x its peer, rank 0 2.5x, each for 12 points of 2 steps, rank-sum p 6.6e-7 and 3.7e-7, a few
ms above the peer), and the smoke fails with it.

Such a rank is genuinely slower: on this shared 2-core machine other jobs took 50 to 93% of its CPU in every trial of
the soak below (suite/watch/foreign.py: its counters less the run's ranks, trial means), and a neighbour that sits on
one rank's core for a second is, to step times, what a fault would be. The watch now measures that CPU outside the run
and classes a flag raised while it was a quarter of the host's or more ``foreign load``, which the bench scores apart on
a clean trial (neither a false alarm nor found). So the clean trial asserts no flag but foreign load: none at all where
nothing outside the run took a quarter of the host's CPU. The injected trials are scored as before, whatever their
flags' class (here 34 of 35 flags were classed foreign load: the host is that busy).

Soaked so (20 rounds, a 1-min load of 8 to 19, two busy processes of ours beside it in about a third of the rounds,
docs/measurements/2026-12-07-cpu-2core-failslow-foreign.md): 18 of 20 passed, 116 to 233 s a round; the clean trial
flagged nothing in any kept round. Both failures came back to back at a load of 15 to 19 with our busy processes
on, and were misses: the ``slow`` rank unnamed (its step 4.5x slower, 82% of the CPU outside the run), then the
``slow`` and ``cpu`` ranks both unnamed (their steps only 1.4x and 1.5x slower, 93% outside the run).

Its trials time and watch the DDP step only (mk/failslow.mk sets DDP_TIMED_ONLY=1: no reference steps, no baseline
steps), so a trial is its launch and its timed steps. Those fill FAILSLOW_BUDGET_S at the first steps' speed; the
injection starts 5 s into them (the injector's anchor: the first timed step, however long the start took), after
the 28 points of past a flag's onset needs (suite/watch/detect.py MIN_BEFORE: up to 4 s at 150 ms a point), and
lasts 20 s (``cpu``: 12 s), over most of the steps left where those are many times slower. Per class, from the
soak (the step's slowdown is the mean step during the injection over the mean step before it; the time is from the
onset to the first flag):

- ``slow`` (``slow:1:5:10:20``): the rank runs 1/10 of every 50 ms, its duty cycle from a real-time thread (on time
  under load). Named in 20 of 20 rounds, 2.8 to 7.1 s after the onset, the step 3.6 to 8.8 times slower.
- ``cpu`` (``cpu:1:5:0.05:12``, a CFS quota of 0.05 CPU). Named in 20 of 20 rounds, 4.3 to 9.1 s after the onset, the
  step 3.8 to 14 times slower. The watch's exchanges came after a count of steps set from the steps before, so the first
  after the onset came as many times later as the steps got slower (named 16 to 18 s after the onset); the ranks now
  also learn, every 0.1 s of steps, the time since the last exchange (suite/watch/watch.py ``Cadence``) and exchange
  within about 2 s of slowed steps. At 0.1 CPU the quota did not bind where the load left a process about 1/8 of a core
  or less (missed in 1 of 13 rounds of an earlier soak).

Left out:

- ``pause`` (``pause:1:5:0.5:20``: stopped 0.5 s after every 0.5 s it runs, each time as its main thread runs; at 1 s
  between pauses a trial whose first steps the load slowed held too few): named in 18 of 20 rounds, 5.1 to 11.3 s after
  the onset, the step 1.3 to 2.9 times slower. One miss: the load made its points 120 ms long, 43 before the onset,
  fewer than the 48 points of clean past the pause detector then asked for (suite/watch/pauses.py ``PAST``: now 28). The
  other: 65 points before the onset, the step 1.9 times slower, no flag (its series was not kept).
- ``noisy`` and ``membw``: on local ranks that share every core, their processes slow every rank alike (nothing to
  name); they are classes of a node's own cores."""

from __future__ import annotations

import json

import pytest

from tests.conftest import make

pytestmark = pytest.mark.slow

SMOKE = {
    "slow:1:5:10:20": "rank 1",  # rank 1 runs 5 ms of every 50 ms for 20 s
    "cpu:1:5:0.05:12": "rank 1",  # rank 1 cut to 0.05 CPU (a CFS quota) for 12 s
    "none": None,
}
"""Each trial's class spec (INJECT's syntax) and the target the watch must name first after its onset."""
BUDGET = ["FAILSLOW_BUDGET_S=14", "FAILSLOW_ITERS=700"]
"""The steps of a trial: as many as fill 14 s at the first steps' speed (tens of ms each), at most 700. At 10 s a
trial whose first steps ran under a load spike took 4.9 s in all, and the injection's onset at 5 s fell after it
(the trial void, 1 round in 20 at a load of 6 to 13): at 14 s the steps must run 2.8 times faster than the first
ones for that."""


def test_the_bench_names_two_classes_right_and_flags_nothing_but_foreign_load_on_a_clean_trial(tmp_path):
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
        if want is None:  # flagged for nothing but a neighbour of the run's: nothing where the host had none
            assert t["inject"] is None and all(f.get("class") == "foreign load" for f in t["flags"]), seen
            assert t["flags"] == [] or t["foreign_cpu_pct"] is not None, seen
            continue
        assert t["inject"] == spec and t["step_slowdown"] >= 0.1, seen
        after = [f for f in t["flags"] if f["raised_s"] >= t["onset_s"]]
        assert after and min(after, key=lambda f: f["raised_s"])["target"] == want, seen
    score = doc["scores"]["watch"]["all"]
    found = len(SMOKE) - 1
    assert (score["found"], score["positives"], score["false_positive_trials"]) == (found, found, 0)
    assert score["foreign_load_trials"] == (doc["trials"][-1]["watch"]["flags"] != [])
    assert score["localisation"]["value"] == 1.0
    assert f"| watch: all | {len(SMOKE)} | {found} / 1 / 0 |" in (out / "failslow.md").read_text()
    assert (out / "confusion-watch.png").read_bytes()[:4] == b"\x89PNG"
    # the trials ran without the DDP case's reference and baseline steps: timed only, and said so
    record = json.loads((out / "trials" / "t001" / "bench.json").read_text())["benchmarks"][0]["extra_info"]
    assert record["checked"] is False and "DDP_TIMED_ONLY=1" in record["unchecked_reason"]
    assert "solo_step_ms" not in record and "slowdowns" in record
    # the CPU outside the run on its host, measured at the exchanges and kept per point of the series
    assert 0 <= record["watch_foreign_cpu_pct"] <= 100 and len(record["watch_series"]["foreign_pct"]) > 0
