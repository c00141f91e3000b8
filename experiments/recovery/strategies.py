"""The recovery strategies a case can run, each a runner ``workdir -> dict`` (the runner contract: plan.py).

- ``elastic``: torchrun elastic restarts from torch.distributed.checkpoint checkpoints (elastic.py), every
  fault class of the schedule, in steps or in wall-clock seconds (wall.py), each checkpoint mode;
- ``torchft``: torchft's fault-tolerant DDP, one replica group per rank of the job, a killed or stopped replica
  healed live from its peer (torchft_strategy.py); it runs the schedules made of kills and stops (Poisson, in
  steps or seconds, included) that leave one replica group alone, its live peer: a Poisson schedule's draws
  spare replica ``schedule.KEPT``, and a spelled schedule that strikes every replica group is refused
  (settings.py).

A job that fails outright is a wrong result with its first line, like a recovery that lost state."""

from __future__ import annotations

import dataclasses
import os

from . import elastic, torchft_strategy
from .plan import Fault, Plan, PlanError, Strategy
from .schedule import KEPT
from .workload import recovery_buffers


def elastic_runner(plan: Plan):
    def run(workdir: str) -> dict:
        try:
            return elastic.run(dataclasses.replace(plan, workdir=workdir))
        except elastic.RecoveryFailed as e:
            return {"strategy": elastic.STRATEGY, "exact": False, "wrong": str(e).splitlines()[0]}

    return run


def torchft_runs(faults: tuple[Fault, ...]) -> bool:
    """Whether the torchft strategy runs this schedule: kills and stops in steps, or kills in wall-clock seconds
    (none is the fault-free run)."""
    return all(f.kind in torchft_strategy.FAULTS for f in faults)


def torchft_runner(plan: Plan):
    def run(workdir: str) -> dict:
        p = dataclasses.replace(plan, workdir=os.path.join(workdir, plan.workdir))
        try:
            out = torchft_strategy.run(p)
        except (PlanError, RuntimeError, OSError) as e:
            return {"strategy": "torchft", "exact": False, "wrong": str(e).splitlines()[0]}
        return out | ({"wrong": out["mismatch"]} if out.get("mismatch") else {})

    return run


def _repeat(s, repeat: int) -> tuple[str, dict]:
    """A case's label suffix and identity of its repeat: none where each case runs once."""
    return ("", {}) if s.repeats == 1 else (f"-r{repeat}", {"repeat": repeat})


def elastic_cases(
    s, st: Strategy, text: str, faults: tuple[Fault, ...], repeat: int = 0, model: dict | None = None
) -> list[tuple[str, dict, dict, object]]:
    """The elastic strategy's cases of one schedule: one per checkpoint mode, (label, identity, fields, build);
    ``model``: the plan's SHARDED_MODEL fields (cases.model_plan; none: the MLP)."""
    out = []
    suffix, again = _repeat(s, repeat)
    for mode in s.ckpt_modes:
        plan = s.plan(faults, mode, s.ckpt_dir, spanning=st.spans_nodes, **(model or {}))
        identity = {"strategy": st.name, "fault": text, "ckpt_mode": mode, **again}
        follow = elastic.follow if plan.nnodes > 1 else None
        build = recovery_buffers(repr(plan) + suffix, elastic_runner(plan), s.ckpt_dir, follow)
        out.append((f"{st.name}-{mode}-{text}{suffix}", identity, {"job_nodes": plan.nnodes}, build))
    return out


def torchft_cases(
    s, st: Strategy, text: str, faults: tuple[Fault, ...], repeat: int = 0, model: dict | None = None
) -> list[tuple[str, dict, dict, object]]:
    """The torchft strategy's case of one schedule, if it is made of kills (no checkpoint, so no mode); ``model``:
    as elastic_cases'."""
    faults = s.schedule(text, keep=KEPT if st.heals_from_peer else None)  # Poisson: the live peer left alone
    if not torchft_runs(faults):
        return []
    suffix, again = _repeat(s, repeat)
    label = f"{st.name}-{text}{suffix}"  # the job's plan as torchft runs it: one replica group of one rank per rank
    workdir = label.replace(":", "-").replace("@", "-")
    plan = s.plan(faults, "none", workdir, spanning=st.spans_nodes, **(model or {}))
    identity = {"strategy": st.name, "fault": text, "ckpt_mode": "none", **again}
    return [(label, identity, {"ckpt_every": None}, recovery_buffers(repr(plan), torchft_runner(plan), s.ckpt_dir))]


CASES = {"elastic": elastic_cases, "torchft": torchft_cases}
"""Each strategy's cases of one schedule, by its name in plan.STRATEGIES, each handed the strategy's record: what
a strategy is (its job spans the nodes, it heals from a live peer) is read from its traits there, never from its
name."""
