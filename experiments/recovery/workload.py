"""What a recovery case runs on the suite's ranks: rank 0 runs the job (its own torchrun sub-job, so that its
restarts do not restart the suite); every rank takes part in a short all_reduce every half second while it
runs, so no rank waits in one collective for the job's whole length, and then every rank gets the job's result
and checks it alike."""

from __future__ import annotations

import dataclasses
import tempfile
import threading

import torch
import torch.distributed as dist

from suite.api import Buffers

from . import elastic
from .plan import Plan

POLL_S = 0.5
DECLARED = ("strategy", "fault", "ckpt_mode", "ckpt_every", "world", "kinds")
"""The result's fields the case declares itself (its identity and fields: cases.py), or that the record leaves out."""


def _run_on_rank0(ctx, plan: Plan, workdir: str) -> dict:
    box: dict = {}

    def job():
        try:
            box["result"] = elastic.run(dataclasses.replace(plan, workdir=workdir))
        except elastic.RecoveryFailed as e:
            box["result"] = {"strategy": elastic.STRATEGY, "exact": False, "wrong": str(e).splitlines()[0]}

    t = threading.Thread(target=job, daemon=True) if ctx.rank == 0 else None
    if t:
        t.start()
    running = torch.ones(1)
    while running.item():
        if t:
            t.join(POLL_S)
        running = torch.tensor([1.0 if t and t.is_alive() else 0.0])
        dist.all_reduce(running, op=dist.ReduceOp.MAX, group=ctx.group)
    got = [box.get("result")]
    dist.broadcast_object_list(got, src=dist.get_global_rank(ctx.group, 0), group=ctx.group)
    return got[0]


def recovery_buffers(plan: Plan):
    def build(ctx, session) -> Buffers:
        # one folder for the run's cases (RECOVERY_DIR, or a new one): cases of one checkpoint mode share the
        # fault-free reference job
        workdir = plan.workdir
        if not workdir and ctx.rank == 0:
            workdir = session.once("recovery-dir", lambda: tempfile.mkdtemp(prefix="recovery-"))
        # the harness builds a case more than once (its check run, its timed set): the job runs once
        result = session.once(("recovery", repr(plan)), lambda: _run_on_rank0(ctx, plan, workdir))
        return Buffers(
            call=lambda async_op: dist.barrier(group=ctx.group, async_op=async_op),
            check=lambda: 0 if result.get("exact") else 1,
            unseeded=True,
            fields={k: v for k, v in result.items() if k not in DECLARED},
        )

    return build
