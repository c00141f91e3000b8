"""The recovery experiment's torchft strategy through its command line (``python -m
experiments.recovery.torchft_strategy``): two replica groups under a Lighthouse, one SIGKILLed (by the clock, or
mid-step) and replaced by a spare that heals live from its peer; the run must equal the one-process reference of the
committed steps bitwise, and each planted recovery bug must fail it with status 6 naming the step (a stale heal after
a kill that struck a restart, a phantom commit after a kill at a step)."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _run(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "out.json"
    cmd = [sys.executable, "-m", "experiments.recovery.torchft_strategy", "--workdir", str(tmp_path / "w")]
    cmd += ["--timeout", "240", "--json", str(out), *args]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    return p, (json.loads(out.read_text()) if out.is_file() else {})


def test_a_replica_killed_by_the_clock_heals_from_its_peer_and_the_run_equals_its_reference(tmp_path):
    # the runner kills replica 1 0.5 s into the run, whatever it does then; the replacement arrives 1.5 s later, past
    # the Lighthouse's 1 s heartbeat timeout: the survivor commits steps alone (the killed replica's samples
    # dropped), then the replacement heals and rejoins. (A kill at a step is the planted phantom's run below.)
    p, out = _run(tmp_path, "--steps", "30", "--step-pad", "0.1", "--fault", "kill:1@0.5s", "--restart-delay", "1.5")
    assert p.returncode == 0, p.stderr[-2000:]
    assert out["exact"] and out["tolerance"] == "bitwise" and out["mismatch"] is None
    assert [c["step"] for c in out["committed"]] == list(range(30))
    kinds = {(e["rank"], e["kind"]) for e in out["events"]}
    assert {(1, "fault"), (1, "recover"), (0, "commit"), (1, "commit")} <= kinds
    (fault,) = [e for e in out["events"] if e["kind"] == "fault"]
    (heal,) = [e for e in out["events"] if e["kind"] == "recover"]
    assert (fault["at_s"], fault["struck"], fault["life"]) == (0.5, "step", 0)
    assert heal["step"] > fault["step"]  # healed to a step the survivor committed alone
    ns = [c["n"] for c in out["committed"]]
    assert 1 in ns and ns[-1] == 2  # alone after the fault, both again at the end
    assert all(n == 2 for n in ns[: fault["step"]])  # both, until the step the kill struck
    assert out["t_detect"] is not None and out["t_recover"] is not None and out["ckpt_save_s"] is None
    dropped = sum(len(c["dropped"]) for c in out["committed"])
    assert out["samples_dropped"] == dropped == 32 * ns.count(1) > 0


PLANTED = {
    # a healed replica keeps its stale weights: replica 1 killed by the clock training, and again as its replacement
    # starts (a restart struck, where a wrong heal is likeliest: its peer loses it in their quorum, past the 1 s
    # collective timeout); the next replacement, a warm spare too, heals, stale
    "stale": ("--steps", "24", "--step-pad", "0.1", "--op-timeout", "1", "--fault", "kill:1@0.3s,kill:1@0.4s"),
    # a step counted as committed that replica 0 never applied
    "phantom": ("--steps", "12", "--step-pad", "0.05", "--fault", "kill:1@4", "--plant-step", "7"),
}


@pytest.mark.parametrize("plant", sorted(PLANTED))
def test_a_planted_recovery_bug_fails_the_run_with_status_6_naming_the_step(tmp_path, plant):
    p, out = _run(tmp_path, *PLANTED[plant], "--plant", plant)
    assert p.returncode == 6, p.stderr[-2000:]
    heal = [(e["step"], e["life"]) for e in out["events"] if e["kind"] == "recover"]
    step = heal[0][0] if plant == "stale" else 7  # stale: the step it healed to; phantom: the skipped one
    assert out["mismatch_step"] == step and not out["exact"]
    assert f"wrong results: step {step}: replica" in p.stderr
    if plant == "stale":
        faults = [(e["at_s"], e["struck"], e["life"]) for e in out["events"] if e["kind"] == "fault"]
        assert faults == [(0.3, "step", 0), (0.4, "restart", 1)] and heal[0][1] == 2, (faults, heal)
        assert "healed with weights that are not the state committed before it" in p.stderr


def test_a_stopped_replica_is_lost_then_heals_from_its_peer_and_the_run_equals_its_reference(tmp_path):
    # replica 1 is stopped at step 3 past the 1 s collective timeout (2.5 s): replica 0 detects it and commits steps
    # alone; continued, the same process rejoins, heals to a step its peer committed alone, and both end together
    p, out = _run(tmp_path, "--steps", "30", "--step-pad", "0.1", "--op-timeout", "1", "--fault", "stop:1@3")
    assert p.returncode == 0, p.stderr[-2000:]
    assert out["exact"] and out["tolerance"] == "bitwise"
    assert [c["step"] for c in out["committed"]] == list(range(30))
    (fault,) = [(e["rank"], e["life"], e["step"]) for e in out["events"] if e["kind"] == "fault"]
    healed = [(e["rank"], e["life"], e["step"]) for e in out["events"] if e["kind"] == "recover"]
    assert fault == (1, 0, 3) and healed and healed[0][:2] == (1, 0) and healed[0][2] > 3
    ns = [c["n"] for c in out["committed"]]
    assert ns[:3] == [2] * 3 and ns[3] == 1 and ns[-1] == 2  # alone after the detection, both again at the end
    assert out["t_detect"] >= 1.0 and out["t_rejoin"] > out["t_detect"]  # lost after the collective timeout
