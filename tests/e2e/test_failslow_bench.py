"""The fail-slow bench's smoke, through the command users type: ``make failslow-bench`` with one trial of each local
class that slows a DDP step (each named right, after its onset) and one clean trial (flagged for nothing), scored
into failslow.json, its table and its confusion-matrix picture.

Not wall-clock fragile within reason: every injection is severe (well above the 10% step slowdown the scores count
from) and starts 8 s after the ranks' sessions start (the injector's anchor), past the case's set-up (about 3 s on
an idle 2-core machine: a machine loaded beyond twice that puts the onset before the first step, and the trial is
void) and seconds before the last of its steps (they fill 12 s at the first steps' speed); it lasts 8 s, so the
record's probes after the steps run at full speed. A class that lands (a node's CPU quota, say) is one more entry
of SMOKE."""

from __future__ import annotations

import json

import pytest

from tests.conftest import make

pytestmark = pytest.mark.slow

SMOKE = {
    "slow:1:8:4:8": "rank 1",  # rank 1 runs a quarter of every 50 ms
    "pause:1:8:1:8": "rank 1",  # rank 1 stopped 1 s after every second it runs
    "none": None,
}
"""Each trial's class spec (INJECT's syntax) and the target the watch must name first after its onset."""
BUDGET = ["FAILSLOW_BUDGET_S=12", "FAILSLOW_ITERS=600"]
"""The steps of a trial: as many as fill 12 s at the first steps' speed (tens of ms each), at most 600."""


def test_the_bench_names_each_local_class_right_and_flags_nothing_on_a_clean_trial(tmp_path):
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
    assert (score["found"], score["positives"], score["false_positive_trials"]) == (2, 2, 0)
    assert score["localisation"]["value"] == 1.0
    assert "| watch: all | 3 | 2 / 1 / 0 |" in (out / "failslow.md").read_text()
    assert (out / "confusion-watch.png").read_bytes()[:4] == b"\x89PNG"
