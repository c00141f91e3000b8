"""The fail-slow injector end to end: a pause injected into one of 2 local ranks mid-run really slows that rank,
as the run itself recorded it, and the truth file says what was injected, where and when."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.inject import truth
from tests.conftest import run_suite

pytestmark = pytest.mark.slow

ONSET_S = 4.0
"""After the target's ring file appears: on an idle 2-core machine a few of the 18 cases run before it, more after."""
PAUSE_S = 1.5  # stopped for 1.5 s after every second it runs
LONG_S = PAUSE_S / 2
"""A step this long holds a pause: a step of a 4 MiB all_reduce of 2 local ranks takes milliseconds."""
ITERS = 100
"""The timed samples per case: all of them on the timeline (suite/harness/journal/timeline.py SAMPLES_PER_CASE)."""


def steps_on_timeline(run: Path, rank: int) -> list[tuple[float, float, list[float]]]:
    """Each case's timed phase on the rank's own timeline, (start, end) in Unix time, with its steps: the time from
    one timed sample's start to the next's, seconds (a sample is timed from after a barrier: a pause in the barrier
    is in the step, not in the sample)."""
    trace = json.loads((run / "trace.json").read_text())
    epoch, events = trace["otherData"]["epoch_unix_s"], trace["traceEvents"]
    mine = [e for e in events if e.get("tid") == rank + 1]
    samples = sorted(e["ts"] for e in mine if e.get("cat") == "sample")
    out = []
    for ts, dur in sorted((e["ts"], e["dur"]) for e in mine if e.get("name") == "timed"):
        starts = [t for t in samples if ts <= t <= ts + dur]
        assert len(starts) == ITERS, len(starts)
        out.append((epoch + ts / 1e6, epoch + (ts + dur) / 1e6, [(b - a) / 1e6 for a, b in zip(starts, starts[1:])]))
    return out


def test_a_pause_slows_its_target_after_the_onset_and_the_truth_says_so(tmp_path):
    """Its own steps hold pauses (a step takes as long as a pause) in the cases after the onset, none before (a
    pause that falls between two cases' timed phases is in no step: the test asks for one of the several)."""
    inject = f"pause:1:{ONSET_S:g}:{PAUSE_S:g}:rest"
    args = ["--experiments", "collectives", "--min-bytes", "1M", "--max-bytes", "4M", "--dtypes", "float32,int32"]
    args += ["--redops", "sum,max,min", "--iters", str(ITERS), "--warmup", "2", "--", "-k", "all_reduce"]
    env = {"INJECT": inject, "SEED": "1", "INJECT_RUN_S": "60"}
    proc = run_suite(tmp_path, *args, env=env, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / "results" / "run"
    (told,) = truth.read(run)
    assert told["plan"] == {
        "cls": "pause",
        "target": 1,
        "onset_s": ONSET_S,
        "severity": PAUSE_S,
        "duration_s": None,
        "seed": 1,
        "text": inject,
    }
    assert told["applied"] and told["here"] and told["applied_unix"] - told["anchor_unix"] >= ONSET_S
    assert told["reverted_unix"] > told["applied_unix"]
    assert "INJECT" not in (run / "config.json").read_text()  # the ranks never saw the plan
    onset, cases = told["applied_unix"], steps_on_timeline(run, 1)
    seen = "; ".join(f"{a - onset:z.1f}..{b - onset:z.1f} s: longest step {max(st):z.3f} s" for a, b, st in cases)
    before = [s for start, end, steps in cases if end < onset for s in steps]
    after = [s for start, end, steps in cases if start > onset for s in steps]
    assert len(before) >= ITERS - 1 and len(after) >= 2 * (ITERS - 1), f"cases from the onset: {seen}"
    assert max(before) < LONG_S, f"a step before the onset as long as a pause; cases from the onset: {seen}"
    assert max(after) > LONG_S, f"no step after the onset held a pause; cases from the onset: {seen}"
