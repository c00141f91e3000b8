"""What a recovery case runs on the suite's ranks: rank 0 runs the job (its own torchrun sub-job, so that its
restarts do not restart the suite); every rank takes part in a short all_reduce every half second while it
runs, so no rank waits in one collective for the job's whole length, and then every rank gets the job's result
and checks it alike."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable

import torch
import torch.distributed as dist

from suite.api import Buffers


POLL_S = 0.5
DECLARED = ("strategy", "heals_from_peer", "fault", "ckpt_mode", "ckpt_every", "world", "kinds")
"""The result's fields the case declares itself (its identity and fields: cases.py), or that the record leaves out."""


Runner = Callable[[str], dict]
"""A strategy's run in a folder of the run's: the runner contract's dict (experiments/recovery/plan.py)."""


Follower = Callable[[str, int, threading.Event], None]
"""A node's side of a job that spans nodes, run by its leading rank while rank 0's runner runs: (the folder, the
node's index, the event that says the runner is done)."""


def _run_on_rank0(ctx, runner: Runner, workdir: str, follow: Follower | None = None) -> dict:
    box: dict = {}

    def job():
        box["result"] = runner(workdir)

    t = threading.Thread(target=job, daemon=True) if ctx.rank == 0 else None
    stop = threading.Event()
    leader = follow is not None and ctx.rank != 0 and ctx.local_rank == 0
    f = threading.Thread(target=follow, args=(workdir, ctx.rank // ctx.local_world_size, stop)) if leader else None
    for th in (t, f):
        if th:
            th.start()
    running = torch.ones(1)
    while running.item():
        if t:
            t.join(POLL_S)
        running = torch.tensor([1.0 if t and t.is_alive() else 0.0])
        dist.all_reduce(running, op=dist.ReduceOp.MAX, group=ctx.group)
    stop.set()
    if f:
        f.join()
    got = [box.get("result")]
    dist.broadcast_object_list(got, src=dist.get_global_rank(ctx.group, 0), group=ctx.group)
    return got[0]


def recovery_buffers(key: str, runner: Runner, workdir: str = "", follow: Follower | None = None):
    """The case's buffers: rank 0 runs ``runner`` (its strategy's job) once, in ``workdir`` (RECOVERY_DIR) or
    a new folder the run's cases share; ``key`` names the job among the run's. ``follow``: a job that spans nodes,
    whose other nodes' leading ranks run it meanwhile (``workdir`` then is a folder every node sees)."""

    def build(ctx, session) -> Buffers:
        # one folder for the run's cases (RECOVERY_DIR, or a new one): cases of one checkpoint mode share the
        # fault-free reference job
        folder = workdir
        if not folder and ctx.rank == 0:
            folder = session.once("recovery-dir", lambda: tempfile.mkdtemp(prefix="recovery-"))
        # the harness builds a case more than once (its check run, its timed set): the job runs once
        result = session.once(("recovery", key), lambda: _run_on_rank0(ctx, runner, folder, follow))
        return Buffers(
            call=lambda async_op: dist.barrier(group=ctx.group, async_op=async_op),
            check=lambda: 0 if result.get("exact") else 1,
            unseeded=True,
            fields={k: v for k, v in result.items() if k not in DECLARED},
        )

    return build
