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


def _run_on_rank0(ctx, plan: Plan) -> dict:
    box: dict = {}

    def job():
        workdir = plan.workdir or tempfile.mkdtemp(prefix="recovery-")
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
        result = _run_on_rank0(ctx, plan)
        return Buffers(
            call=lambda async_op: dist.barrier(group=ctx.group, async_op=async_op),
            check=lambda: 0 if result.get("exact") else 1,
            unseeded=True,
            fields={k: v for k, v in result.items() if k != "kinds"},
        )

    return build
