"""The fail-slow bench's smoke, through the command users type: ``make failslow-bench`` with one trial of each local
class that slows a DDP step (each named right, after its onset) and one clean trial (flagged for nothing), scored
into failslow.json, its table and its confusion-matrix picture.

Not wall-clock fragile: every injection is severe (well above the 10% step slowdown the scores count from) and
starts 6 s after the ranks' sessions start, past the case's set-up (a few seconds on a loaded 2-core machine) and
long before the last of its steps; it lasts 8 s, so the steps after it and the record's probes run at full speed.
A class that lands (a node's CPU quota, say) is one more entry of SMOKE."""

from __future__ import annotations

import json

import pytest

from tests.conftest import make

pytestmark = pytest.mark.slow

SMOKE = {
    "slow:1:6:4:8": "rank 1",  # rank 1 runs a quarter of every 50 ms
    "pause:1:6:1:8": "rank 1",  # rank 1 stopped 1 s after every second it runs
    "none": None,
}
"""Each trial's class spec (INJECT's syntax) and the target the watch must name first after its onset."""
ITERS = 400
"""Training steps per trial: at tens of ms each, the onset falls inside the steps and leaves seconds after it."""


def test_the_bench_names_each_local_class_right_and_flags_nothing_on_a_clean_trial(tmp_path):
    specs = ",".join(SMOKE)
    knobs = [f"TRIALS={len(SMOKE)}", "FAILSLOW_CYCLE=1", f"FAILSLOW_CLASSES={specs}", f"FAILSLOW_ITERS={ITERS}"]
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
    assert (score["found"], score["positives"], score["false_positive_trials"]) == (2, 2, 0)
    assert score["localisation"]["value"] == 1.0
    assert "| watch: all | 3 | 2 / 1 / 0 |" in (out / "failslow.md").read_text()
    assert (out / "confusion-watch.png").read_bytes()[:4] == b"\x89PNG"
