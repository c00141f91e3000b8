"""One torchft replica group (one rank) of the recovery experiment's torchft strategy.

Started by ``torchft_strategy.run`` as ``python -m experiments.recovery.torchft_worker <json args>``. It trains
the model with torchft's fault-tolerant DDP (``torchft.ddp.DistributedDataParallel`` under a
``torchft.Manager``, a Gloo process group across the replica groups, quorums from the Lighthouse) and appends
one JSON line per attempted step to its log:

- ``{"kind": "step", "step", "ok", "n", "rank", "t0", "t", "sha"}``: the step number the attempt
  ran at, whether it was committed, the number of replicas that took part (``n``) and this replica's rank
  among them, and a digest of the weights after it;
- ``{"kind": "heal", "step", "t", "sha"}``: live recovery from a healthy peer: the step it healed to and a
  digest of the weights it received;
- ``{"kind": "detect", "step", "t", "error"}``: a collective failed (a peer was lost mid-step);
- ``{"kind": "fault", "step", "t", "fault", "pid"}``: a scheduled fault of ``faults`` (this life's, in step
  order): after joining the step's quorum, so that its peers lose it mid-step, this replica SIGKILLs itself
  (``kill``, the life's last) or SIGSTOPs itself (``stop``: the runner sends SIGCONT past the timeout, and it
  rejoins and heals);
- ``{"kind": "orphan", "step"}``: a replacement that found no live peer in its first quorum (the others had
  finished) and so never trains;
- ``{"kind": "start"|"spare"|"wake"|"ready"|"done", "t"}``; at the end it saves its weights to ``final``.

A replacement for a replica the schedule kills is a warm spare: started with the run, it imports and loads
the data, then waits for ``wake`` (written when the replica it replaces dies) before it joins.

It trains the article's model, or SHARDED_MODEL's (``model``: torchft_data.Data). The samples of a step are a
function of (seed, step, rank among the replicas that took part) only, so the
reference can rebuild every committed step from its ``n``. The planted recovery bug this process carries (``plant``, its
name in plan.PLANTS, whose fields say what it does): ``stale`` (a healed replica keeps its own stale weights and
only takes the peer's step number) or ``phantom`` (the step ``plant_step`` is counted as committed but this replica
never applies it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.nn as nn
from torch.distributed import TCPStore
from torchft import Manager
from torchft.ddp import DistributedDataParallel
from torchft.process_group import ProcessGroupDummy, ProcessGroupGloo

from . import torchft_data as workload
from .plan import NO_PLANT, PLANTS
from .torchft_data import LR, digest


class Log:
    """Appends one JSON line per event, flushed at once (the process may be SIGKILLed at any moment)."""

    def __init__(self, path: str):
        self.f = open(path, "a", buffering=1)

    def __call__(self, kind: str, **fields) -> None:
        self.f.write(json.dumps({"kind": kind, "t": time.time(), **fields}) + "\n")
        self.f.flush()


def fault_tolerant_ddp(manager, model: nn.Module) -> nn.Module:
    """torchft's ``DistributedDataParallel`` with a comm hook that survives a peer lost mid-allreduce.

    torchft 0.2.0's own hook returns the failed work's inner future, which is never set when Gloo raises
    ("Connection closed by peer"), so the backward pass dies on an assertion instead of the step being
    dropped. Here the hook waits for the fault-tolerant all_reduce (the average over the replicas that took
    part, in place) and hands back the bucket: after a failure the manager has the error and
    ``should_commit`` refuses the step, so the bucket's contents are never applied."""

    class Ddp(DistributedDataParallel):
        @staticmethod
        def _comm_hook(state, bucket):
            state.allreduce(bucket.buffer()).wait()
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut

    return Ddp(manager, model)


def build(a: dict, log: Log, data: workload.Data):
    """The Manager, the fault-tolerant DDP model and the inner optimizer of one replica group."""
    plant = PLANTS.get(a.get("plant") or "", NO_PLANT)
    model = data.model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)

    def state_dict():
        return {"model": model.state_dict(), "optim": opt.state_dict()}

    def load_state_dict(sd):
        if not plant.keeps_stale:  # planted: a healed replica keeps its own (stale) weights
            model.load_state_dict(sd["model"])
            opt.load_state_dict(sd["optim"])
        log("heal", step=manager.current_step(), sha=digest(model))

    timeout = timedelta(seconds=a["op_timeout_s"])
    manager = Manager(
        pg=ProcessGroupGloo(timeout=timeout),
        load_state_dict=load_state_dict,
        state_dict=state_dict,
        min_replica_size=1,
        use_async_quorum=False,
        timeout=timeout,
        quorum_timeout=timedelta(seconds=a["quorum_timeout_s"]),
        connect_timeout=timeout,
        rank=0,
        world_size=1,
        store_addr="127.0.0.1",
        store_port=store.port,
        lighthouse_addr=a["lighthouse"],
        replica_id=f"replica_{a['replica']}",
        heartbeat_interval=timedelta(milliseconds=50),
    )
    return manager, fault_tolerant_ddp(manager, model), model, opt, store


def train(a: dict) -> None:
    torch.set_num_threads(1)  # the reference replays the steps with one thread: the same sums, bitwise
    log = Log(a["log"])
    log("start", replica=a["replica"])
    data = workload.Data(a["seed"], a["groups"], a["batch"], a.get("model") or "")
    # DDP's first construction imports its compiler stack (seconds): done here, before a spare is warm
    nn.parallel.DistributedDataParallel(nn.Linear(1, 1), process_group=ProcessGroupDummy(0, 1))
    if a.get("wake"):  # a warm spare: imported and loaded, it takes over a killed replica when woken
        log("spare")
        while not os.path.exists(a["wake"]):
            time.sleep(0.005)
        log("wake")
    manager, ddp, model, opt, _store = build(a, log, data)
    report_error = manager.report_error

    def detected(e: Exception) -> None:  # the first sign of a lost peer this replica sees (a failed collective)
        log("detect", step=manager.current_step(), error=f"{type(e).__name__}: {e}"[:200])
        report_error(e)

    manager.report_error = detected
    log("ready", step=manager.current_step())
    while a.get("go") and not os.path.exists(a["go"]):  # every replica joins the first quorum together
        time.sleep(0.01)
    loss_fn = data.loss
    pending = list(a["faults"])
    plant = PLANTS.get(a.get("plant") or "", NO_PLANT)  # the planted bug this process carries, if any
    while manager.current_step() < a["steps"]:
        t0 = time.time()
        opt.zero_grad(set_to_none=False)
        manager.start_quorum()  # synchronous: a replica behind the others heals here, before its forward
        step, n, rank = manager.current_step(), manager.num_participants(), manager.participating_rank()
        if a.get("wake") and n == 1 and step == 0:  # a replacement with no live peer: the others are done
            log("orphan", step=step)
            break
        if pending and step >= pending[0]["step"]:  # the fault: mid-step, after the quorum
            kind = pending.pop(0)["kind"]
            log("fault", step=step, fault=kind, pid=os.getpid())
            os.kill(os.getpid(), signal.SIGKILL if kind == "kill" else signal.SIGSTOP)  # SIGCONT: the runner's
        x, y = data.batch(step, rank or 0)
        loss_fn(ddp(x), y).backward()
        time.sleep(max(0.0, t0 + a["step_pad_s"] - time.time()))  # a bigger model's step time, if asked
        ok = manager.should_commit()
        if ok and not (plant.skips_step and step == a.get("plant_step")):
            opt.step()  # planted: the step counts as committed, this replica never applies it
        log("step", step=step, ok=ok, n=n, rank=rank, t0=t0, sha=digest(model))
    else:
        torch.save(model.state_dict(), a["final"])
    log("done", step=manager.current_step())
    manager.shutdown(wait=False)


if __name__ == "__main__":
    train(json.loads(sys.argv[1]))
