"""The torchft strategy's verification and measurements, from the replicas' logs (``torchft_worker``).

Verified, not assumed: the one-process reference applies exactly the committed steps, each with the samples
of the replicas that took part (ranks ``0..n-1`` of the step's quorum), their gradients averaged the way
torchft's DDP does (the sum over the replicas, divided by ``n``), and the SGD step. Every committed step of
every replica and every healed replica's received weights must equal the reference bitwise: with one or
two replicas in a step the sum has one order, so the weights' digests must match. With three or more the
order of Gloo's sum is its own: the replicas are then checked bitwise against each other (every step,
every heal) and the final weights against the reference within ``TOLERANCE``.
A mismatch raises ``RecoveryMismatch`` naming the first step where the state went wrong.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import torch
import torch.nn as nn

from . import torchft_data as workload
from .torchft_data import LR, digest

TOLERANCE = {"rtol": 1e-5, "atol": 1e-7}
"""Final weights against the reference where a step had three or more replicas (Gloo's summation order)."""


class RecoveryMismatch(Exception):
    """The recovered state differs from the reference: the run fails with the wrong-results status."""

    def __init__(self, step: int, what: str):
        super().__init__(f"step {step}: {what}")
        self.step = step


def read_logs(workdir: Path) -> list[dict]:
    """Every replica's log lines, each with its ``replica`` and ``life`` (0 first start, 1 after a restart)."""
    rows = []
    for path in sorted(workdir.glob("replica*.life*.jsonl")):
        replica, life = (int(part.removeprefix("replica").removeprefix("life")) for part in path.stem.split("."))
        for line in path.read_text().splitlines():
            if line.strip():
                rows.append({**json.loads(line), "replica": replica, "life": life})
    return sorted(rows, key=lambda r: r["t"])


def committed_steps(rows: list[dict]) -> dict[int, dict]:
    """step -> {"n": replicas that took part, "replicas": the ones that committed it, "t": first commit}."""
    out: dict[int, dict] = {}
    for r in rows:
        if r["kind"] != "step" or not r["ok"]:
            continue
        c = out.setdefault(r["step"], {"n": r["n"], "replicas": [], "t": r["t"]})
        if c["n"] != r["n"]:
            raise RecoveryMismatch(r["step"], f"committed with {c['n']} replicas by one and {r['n']} by another")
        c["replicas"].append({"replica": r["replica"], "rank": r["rank"]})
    return out


def reference(plan, steps: dict[int, dict]) -> tuple[list[str], nn.Module]:
    """Digests of the one-process reference's weights before step 0 and after each committed step, and its
    final model. Each step: every taking-part replica's gradient on its own batch, summed in rank order,
    divided by n, one SGD step: what torchft's DDP does, in one process and one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data = workload.Data(plan.seed, plan.world, plan.batch_per_rank, plan.model)
        model = data.model()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        loss_fn = data.loss
        shas = [digest(model)]
        for s in range(plan.steps):
            if s not in steps:
                raise RecoveryMismatch(s, "never committed, yet the run ended")
            n = steps[s]["n"]
            total = None
            for rank in range(n):
                x, y = data.batch(s, rank)
                opt.zero_grad(set_to_none=False)
                loss_fn(model(x), y).backward()
                grads = [p.grad.clone() for p in model.parameters()]
                total = grads if total is None else [a + b for a, b in zip(total, grads)]
            for p, g in zip(model.parameters(), total):
                g /= n
                p.grad.copy_(g)
            opt.step()
            shas.append(digest(model))
        return shas, model
    finally:
        torch.set_num_threads(threads)


def verify(plan, rows: list[dict], workdir: Path) -> dict:
    """Checks every replica's committed steps and heals; returns the committed steps and whether the
    comparison was bitwise against the reference. Raises RecoveryMismatch at the first wrong step.

    Bitwise runs (at most two replicas in any step): every committed step and every heal against the
    reference's digests. Otherwise against the peers, bitwise too (torchft's all-reduce hands every replica
    the same sum): a committed step against the first replica that committed it, a heal to step s against
    the weights committed at step s - 1; and the final weights against the reference within TOLERANCE."""
    steps = committed_steps(rows)
    shas, ref = reference(plan, steps)
    bitwise = all(c["n"] <= 2 for c in steps.values())
    expected = {-1: shas[0]}  # step -> the weights after it; -1: the initial weights
    for r in rows:  # in time order: the first wrong state is named
        if r["kind"] == "heal" and r["sha"] != (shas[r["step"]] if bitwise else expected.get(r["step"] - 1)):
            raise RecoveryMismatch(
                r["step"], f"replica {r['replica']} healed with weights that are not the state committed before it"
            )
        if r["kind"] != "step" or not r["ok"]:
            continue
        want = shas[r["step"] + 1] if bitwise else expected.setdefault(r["step"], r["sha"])
        if r["sha"] != want:
            of = "the reference of the committed steps" if bitwise else "its peers' after the same step"
            raise RecoveryMismatch(r["step"], f"replica {r['replica']}'s weights differ from {of}")
    ref_state = ref.state_dict()
    for final in sorted(workdir.glob("replica*.final.pt")):
        state = torch.load(final)
        for k, v in ref_state.items():
            if not torch.allclose(state[k], v, **TOLERANCE):
                raise RecoveryMismatch(plan.steps - 1, f"{final.stem}'s final {k} differs from the reference")
    return {"steps": steps, "bitwise": bitwise}


def committed_log(plan, steps: dict[int, dict]) -> list[dict]:
    """Per committed step: the replicas that took part, the ones that committed it, and the samples used and
    dropped (the batches of the ranks that were missing from the step)."""
    data = workload.Data(plan.seed, plan.world, plan.batch_per_rank, plan.model)
    groups = plan.world
    out = []
    for s in sorted(steps):
        n = steps[s]["n"]
        ids = [data.ids(s, r) for r in range(groups)]
        out.append(
            {
                "step": s,
                "n": n,
                "committed_by": sorted(steps[s]["replicas"], key=lambda x: x["rank"]),
                "samples": [i for r in range(n) for i in ids[r]],
                "dropped": [i for r in range(n, groups) for i in ids[r]],
                "t": steps[s]["t"],
            }
        )
    return out


def timings(plan, rows: list[dict], log: list[dict]) -> dict:
    """Time to detect and recover, steps redone, samples dropped, the clean step cost and ETTR.

    Times are seconds; ``t_fault`` from the first step's start, the others from the (first) fault:
    ``t_detect`` to the first sign of it a replica saw (a failed collective, or a quorum without it),
    ``t_recover`` to the first step committed after it, ``t_rejoin`` to the first step committed by every
    replica (the job at full strength again: a killed one's replacement, or a stopped one, healed);
    ``heal_s`` is a replacement's wake-up to its healed state (the live transfer from a peer).
    ``steps_redone``: step numbers attempted and not committed, then run again.
    ``samples_dropped``: the batches of the replicas missing from committed steps. ``step_s_clean``: the
    mean committed step with every replica. ``ettr``: the committed samples' worth of clean steps over
    the wall time from the first step's start to the last commit of any replica. The mean, not the median:
    each replica's clean steps lie apart inside that wall time, so a fault-free run reads at most 1 (a
    median above the mean would read more)."""
    t_go = min(r["t0"] for r in rows if r["kind"] == "step")  # the first step's start
    faults = [r for r in rows if r["kind"] == "fault"]
    t_fault = faults[0]["t"] if faults else None
    after = [r for r in rows if t_fault is not None and r["t"] > t_fault]
    full = plan.world
    detect = [r["t"] for r in after if r["kind"] == "detect" or (r["kind"] == "step" and r["n"] < full)]
    recover = [c["t"] for c in log if t_fault is not None and c["t"] > t_fault]
    rejoin = [r["t"] for r in after if r["kind"] == "step" and r["ok"] and r["n"] == full]
    woken = {(r["replica"], r["life"]): r["t"] for r in rows if r["kind"] == "wake"}
    heals = [r["t"] - woken[r["replica"], r["life"]] for r in after if r["kind"] == "heal" and r["life"] > 0]
    clean = [r["t"] - r["t0"] for r in rows if r["kind"] == "step" and r["ok"] and r["n"] == full]
    step_s = statistics.fmean(clean) if clean else None
    t_end = max(r["t"] for r in rows if r["kind"] == "step" and r["ok"])
    wall = t_end - t_go
    committed = sum(c["n"] for c in log) / full  # the committed samples, in steps of the whole job
    redone = {r["step"] for r in rows if r["kind"] == "step" and not r["ok"]}
    return {
        "wall_s": wall,
        "t_fault": None if t_fault is None else t_fault - t_go,
        "t_detect": None if not detect else detect[0] - t_fault,
        "t_recover": None if not recover else recover[0] - t_fault,
        "t_rejoin": None if not rejoin else rejoin[0] - t_fault,
        "heal_s": None if not heals else heals[0],
        "steps_redone": len(redone),
        "samples_dropped": sum(len(c["dropped"]) for c in log),
        "step_s_clean": step_s,
        "ettr": None if step_s is None or wall <= 0 else committed * step_s / wall,
    }


def events(rows: list[dict], t0: float) -> list[dict]:
    """The timeline: each fault, detection, heal (recover) and commit, per replica, in seconds from ``t0``."""
    kinds = {"fault": "fault", "detect": "detect", "heal": "recover"}
    out = []
    for r in rows:
        if r["kind"] == "heal" and r["life"] == 0 and r["step"] == 0:
            continue  # torchft's first-step weight sync from the primary replica, not a recovery
        kind = "commit" if r["kind"] == "step" and r["ok"] else kinds.get(r["kind"])
        if kind:
            event = {"rank": r["replica"], "kind": kind, "t": r["t"] - t0, "step": r.get("step"), "life": r["life"]}
            out.append(event | {k: r[k] for k in ("at_s", "struck") if k in r})  # a wall-clock fault's
    return out
