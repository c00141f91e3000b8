"""What a recovery run's event files say (pure logic, no torch): when each fault struck, when the job first saw
it, when it committed its first step after it, the steps redone, and whether the model's state at every
restore and commit equals the fault-free run's state at the same step (the first step where it does not is
the step where the state went wrong).

Events (experiments/recovery/worker.py): ``{rank, attempt, kind, t, step, ...}`` with kind restore, commit,
save, fault, detect, done; every rank's restore, commit and done carry a digest of its model's state.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

KINDS = {
    "t_fault": "measured: the fault's time from the job's launch",
    "t_detect": "measured: fault -> the first rank that saw it (its collective failed, or the agent's SIGTERM)",
    "t_recover": "measured: fault -> the first step committed after the restart",
    "steps_redone": "measured: steps committed before the fault and trained again after the restore",
    "samples_dropped": "measured: samples of the steps the final state never trained on",
    "ckpt_save_s": "measured: median time training waited for a checkpoint (async: for the previous one too)",
    "ckpt_load_s": "measured: median time of a restore's dcp.load",
    "step_s_clean": "measured: median step of the fault-free job",
    "wall_s": "measured: the job's launch -> its exit",
    "ettr": "derived: steps x step_s_clean / wall_s",
}
"""Each number's kind and how it was obtained (the records' provenance)."""
TIMELINE = ("fault", "detect", "recover", "commit")
TRUTH_WAIT_S = 30.0
"""How long the scoring waits for the host's truth of a disconnect after the job ended (it is written as the node
is connected again, which the job needs to end)."""


class RecoveryFailed(RuntimeError):
    """The job did not finish: the restarts ran out, or a rank failed outside the plan's faults."""


def read_events(workdir: str | Path) -> list[dict]:
    """Every rank's events and the runner's (its wall-clock faults: wall.py), in time order."""
    out = []
    for p in sorted((Path(workdir) / "events").glob("*.jsonl")):
        out += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return sorted(out, key=lambda e: e["t"])


def state_at(events: list[dict]) -> dict[tuple[int, int], str]:
    """Each rank's digest of its state after each step (0: the initial state) in a fault-free run, by
    ``(rank, step)``."""
    return {
        (e["rank"], e["step"]): e["digest"] for e in events if e.get("digest") and e["kind"] in ("restore", "commit")
    }


def expected(e: dict, reference: dict[tuple[int, int], str]) -> str | None:
    """The digest a rank's restore or commit must have. A restore loads the checkpoint, which holds rank 0's state
    (every rank takes rank 0's BatchNorm statistics before saving): every rank must hold rank 0's state of the
    fault-free run at that step. A commit: the rank's own state of the fault-free run at that step (DDP keeps the
    parameters equal on every rank; each rank's BatchNorm statistics are its own batch's until the next forward)."""
    return reference.get((0 if e["kind"] == "restore" else e["rank"], e["step"]))


def first_wrong(events: list[dict], reference: dict[tuple[int, int], str]) -> dict | None:
    """The first restore or commit, on any rank, whose state differs from the fault-free run's at that step, or
    None."""
    for e in events:
        if e.get("digest") and e["kind"] in ("restore", "commit"):
            want = expected(e, reference)
            if want is not None and e["digest"] != want:
                return e
    return None


def wrong_finals(events: list[dict], reference: dict[tuple[int, int], str], *, steps: int, world: int) -> list[int]:
    """The ranks whose final state (``done``) is missing or differs from their own state after the fault-free
    run's last step."""
    final = {e["rank"]: e["digest"] for e in events if e["kind"] == "done"}
    return [r for r in range(world) if reference.get((r, steps)) is None or final.get(r) != reference[(r, steps)]]


def wrong_line(e: dict) -> str:
    what = "restored as" if e["kind"] == "restore" else "after"
    return (
        f"the model's state went wrong at step {e['step']}: rank {e['rank']}'s state {what} step {e['step']} "
        f"(attempt {e['attempt']}) differs from the fault-free run's at that step"
    )


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def per_fault(events: list[dict]) -> list[dict]:
    """Each fault: when it struck and what (a step, or a restart), its detection (the first sign any rank saw),
    the first step committed after it (by whichever later attempt got that far: a fault can strike the restart
    after another), and the steps redone: the last step its attempt committed minus the step the next attempt
    that restored restored (none when its attempt committed none: a restart struck loses nothing more)."""
    out = []
    for f in (e for e in events if e["kind"] == "fault"):
        a = f["attempt"]
        detect = [e["t"] for e in events if e["kind"] == "detect" and e["attempt"] == a and e["t"] >= f["t"]]
        later = [e for e in events if e["attempt"] > a]
        commits = [e["t"] for e in later if e["kind"] == "commit"]
        nxt = min((e["attempt"] for e in later if e["kind"] == "restore"), default=None)
        restored = [e["step"] for e in later if e["kind"] == "restore" and e["attempt"] == nxt]
        done = [e["step"] for e in events if e["kind"] == "commit" and e["attempt"] == a]
        out.append(
            {
                "rank": f["rank"],
                "fault": f.get("fault"),
                "step": f["step"],
                "struck": f.get("struck", "step"),
                "at_s": f.get("at_s"),
                "t": f["t"],
                "detect_s": min(detect) - f["t"] if detect else None,
                "recover_s": min(commits) - f["t"] if commits else None,
                "redone": max(0, max(done, default=0) - min(restored)) if restored else None,
                **({"node": f["node"], "stretch_s": f["stretch_s"]} if "node" in f else {}),
            }
        )
    return out


def chain_steps(events: list[dict]) -> set[int]:
    """The steps whose samples the final state holds: each attempt's commits up to the step the next one
    restored (a step committed and then rolled back was redone, not kept)."""
    kept: set[int] = set()
    attempts = sorted({e["attempt"] for e in events})
    for a, nxt in zip(attempts, [*attempts[1:], None]):
        upto = min((e["step"] for e in events if e["attempt"] == nxt and e["kind"] == "restore"), default=None)
        kept |= {
            e["step"]
            for e in events
            if e["attempt"] == a and e["kind"] == "commit" and (upto is None or e["step"] <= upto)
        }
    return kept


def summarise(events: list[dict], ref_events: list[dict], *, steps: int, global_batch: int, t0: float) -> dict:
    """The contract's numbers of one run (elastic.run adds strategy, wall_s, ettr and the plan's fields)."""
    faults = per_fault(events)
    ref_steps = [e["step_s"] for e in ref_events if e["kind"] == "commit" and e["rank"] == 0]
    return {
        "t_fault": faults[0]["t"] - t0 if faults else None,
        "t_detect": _mean([f["detect_s"] for f in faults if f["detect_s"] is not None]),
        "t_recover": _mean([f["recover_s"] for f in faults if f["recover_s"] is not None]),
        "steps_redone": sum(f["redone"] or 0 for f in faults),
        "samples_dropped": global_batch * (steps - len(chain_steps(events) & set(range(1, steps + 1)))),
        "ckpt_save_s": _median([e["save_s"] for e in events if e["kind"] == "save" and e["rank"] == 0]),
        "ckpt_load_s": _median([e["load_s"] for e in events if e["kind"] == "restore" and e["load_s"] > 0]),
        "step_s_clean": _median(ref_steps),
        "per_fault": [{**f, "t": f["t"] - t0} for f in faults],
    }


def timeline(events: list[dict], t0: float) -> list[dict]:
    """The contract's events: each rank's fault (a restart it struck marked ``struck``), detection, recovery
    (its first commit after a restart) and commits, with times from the job's start."""
    out, seen_restart = [], set()
    for e in events:
        if e["kind"] in ("fault", "detect", "commit"):
            out.append({"rank": e["rank"], "kind": e["kind"], "t": e["t"] - t0, "step": e.get("step")})
            if e["kind"] == "fault" and e.get("struck") == "restart":  # no step: the rank was starting again
                out[-1] |= {"step": None, "struck": "restart"}
        if e["kind"] == "commit" and e["attempt"] > 0 and (e["rank"], e["attempt"]) not in seen_restart:
            seen_restart.add((e["rank"], e["attempt"]))
            out.append({"rank": e["rank"], "kind": "recover", "t": e["t"] - t0, "step": e["step"]})
    return out


def host_faults(faults, workdir: Path, events: list[dict]) -> list[dict]:
    """The disconnects of a plan's ``faults`` as fault events, from the truth the host wrote
    (``truth/disconnect<i>.json``, disconnect.py ``--watch``): struck at its ``t_disconnect``, in the attempt
    running then, on the node's first rank of that attempt; none for a disconnect that the job's end came before.
    RecoveryFailed where the host wrote none (no watcher ran). The scoring's read of the truth: only once the job
    has ended."""
    n = sum(f.kind == "disconnect" for f in faults)
    files = [workdir / "truth" / f"disconnect{i}.json" for i in range(n)]
    deadline = time.time() + TRUTH_WAIT_S
    while not all(p.is_file() for p in files) and time.time() < deadline:
        time.sleep(0.1)
    out = []
    for p in files:
        if not p.is_file():
            raise RecoveryFailed(f"no truth of the disconnect at {p} (the host's disconnect watcher did not strike)")
        truth = json.loads(p.read_text())
        if truth.get("error"):
            raise RecoveryFailed(f"the disconnect's host side failed: {truth['error']}")
        if not truth.get("struck"):
            continue
        t = truth["t0"] + truth["t_disconnect"]  # the host's clock starts at the job's first step
        before = [e for e in events if e["t"] <= t]
        attempt = max((e["attempt"] for e in before), default=0)
        host = f"node{truth['node']}"
        on = [e for e in events if e.get("host") == host]  # the node's ranks then (or in any attempt: none started)
        ranks = [e["rank"] for e in on if e["attempt"] == attempt] or [e["rank"] for e in on]
        training = any(e["kind"] == "commit" and e["attempt"] == attempt for e in before)
        out.append(
            {
                "rank": min(ranks, default=-1),
                "node": truth["node"],
                "attempt": attempt,
                "kind": "fault",
                "t": t,
                "step": max((e["step"] for e in before if e["kind"] in ("restore", "commit")), default=0),
                "fault": "disconnect",
                "at_s": truth["at_s"],
                "stretch_s": truth["stretch_s"],
                "struck": "step" if training else "restart",
            }
        )
    return out
