"""The fail-slow injector end to end: a pause injected into one of 2 local ranks mid-run really slows that rank
for its stretch, as the run itself recorded it, and the truth file says what was injected, where and when.

The run is one all_reduce case whose rank 0 sleeps ``STEP_S`` before each timed op (``SUITE_INJECT_DELAY``, the
suite's planted late rank; rank 1 waits for it): its timed steps last at least ``ITERS`` x ``STEP_S`` however fast
the host is, so that the stretch, a few seconds after the rank's session starts, falls inside them on an idle host
as on a loaded one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.inject import truth
from suite.inject.classes import pause
from tests.conftest import run_suite

pytestmark = pytest.mark.slow

ITERS = 70
"""The timed steps: all of them on the timeline (suite/harness/journal/timeline.py SAMPLES_PER_CASE)."""
STEP_S = 0.1
"""Each timed step's least length: the steps take at least ITERS x STEP_S = 7 s."""
ONSET_S, STRETCH_S = 4.0, 3.0
"""After the target's session starts: its case's set-up takes less (under 1 s on a loaded 2-core host), and its
steps go on past the stretch's end (7 s of steps from before the onset, and the pause on top: they end at least
1.5 s after it, 15 steps)."""
PAUSE_S = 1.5
"""Stopped for 1.5 s after every pause.RUN_S it runs: the stretch's first pause pause.RUN_S after its onset."""
LONG_S = PAUSE_S / 2
"""A step this long holds a pause: a step is STEP_S and milliseconds."""
FEW = 5
"""The fewest steps the test asks for before the onset and after the stretch (each side leaves tens)."""


def steps_on_timeline(run: Path, rank: int) -> list[tuple[float, float]]:
    """The rank's timed steps on its own timeline, (start, end) in Unix time: from one timed sample's start to the
    next's (a sample is timed from after a barrier: a pause in the barrier is in the step, not in the sample)."""
    trace = json.loads((run / "trace.json").read_text())
    epoch, events = trace["otherData"]["epoch_unix_s"], trace["traceEvents"]
    mine = [e for e in events if e.get("tid") == rank + 1]
    starts = sorted(epoch + e["ts"] / 1e6 for e in mine if e.get("cat") == "sample")
    assert len(starts) == ITERS, len(starts)
    return list(zip(starts, starts[1:]))


def test_a_pause_slows_its_target_for_its_stretch_and_the_truth_says_so(tmp_path):
    """The rank's steps hold the stretch's pause (a step takes as long as a pause), none before it or after it."""
    inject = f"pause:1:{ONSET_S:g}:{PAUSE_S:g}:{STRETCH_S:g}"
    env = {"INJECT": inject, "SEED": "1", "INJECT_RUN_S": "60", "SUITE_INJECT_DELAY": f"0:{STEP_S:g}@before"}
    args = ["--experiments", "collectives", "--min-bytes", "64K", "--max-bytes", "64K", "--dtypes", "float32"]
    args += ["--redops", "sum", "--iters", str(ITERS), "--warmup", "2", "--budget-s", "0", "--", "-k", "all_reduce"]
    proc = run_suite(tmp_path, *args, env=env, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / "results" / "run"
    (told,) = truth.read(run)
    assert told["plan"] == {
        "cls": "pause",
        "target": 1,
        "onset_s": ONSET_S,
        "severity": PAUSE_S,
        "duration_s": STRETCH_S,
        "seed": 1,
        "text": inject,
    }
    assert told["applied"] and told["here"] and told["applied_unix"] - told["anchor_unix"] >= ONSET_S
    assert told["reverted_unix"] - told["anchor_unix"] >= ONSET_S + STRETCH_S
    assert "INJECT" not in (run / "config.json").read_text()  # the ranks never saw the plan
    onset, end, steps = told["applied_unix"], told["reverted_unix"], steps_on_timeline(run, 1)
    seen = f"steps from the onset: {steps[0][0] - onset:z.1f}..{steps[-1][1] - onset:z.1f} s"
    before = [b - a for a, b in steps if b < onset]
    held = [a for a, b in steps if a > onset and b < end + PAUSE_S and b - a > LONG_S]
    after = [b - a for a, b in steps if a > end]
    assert len(before) >= FEW and len(after) >= FEW, seen
    assert max(before) < LONG_S and max(after) < LONG_S, f"a step outside the stretch as long as a pause; {seen}"
    assert held, f"no step held the stretch's pause (due {pause.RUN_S:g} s after its onset); {seen}"
