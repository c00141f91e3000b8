"""One rank of the recovery job, as torchrun starts it: ``python -m experiments.recovery.worker PLAN.json``.

It trains the shared MLP (``suite.api.models``, the DDP experiment's communication-heavier model) on a data
order drawn from the seed, or the plan's SHARDED_MODEL factory's model on its batches (user.py), for the plan's
steps, saves a torch.distributed.checkpoint every
``ckpt_every`` steps, restores the latest one when torchrun restarts it, and strikes its own scheduled fault:
fault i of the plan strikes in attempt i (TORCHELASTIC_RESTART_COUNT). Every event goes to
``<workdir>/events/rank<r>.jsonl`` with its wall-clock time; every rank adds a digest of its model's state to each
restore and commit, which the runner compares with the fault-free run's.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
from torch.nn.parallel import DistributedDataParallel as DDP

from suite.api import models

from .plan import NO_PLANT, PLANTS, Plan
from .user import Yours

N_SAMPLES = 256
PROCESS = AsyncCheckpointerType.PROCESS
LR, MOMENTUM = 0.05, 0.9
START_TIMEOUT_S = 120
"""How long a rank waits for its attempt's other ranks to start (a lost one fails the attempt after it)."""


class Log:
    """This rank's event file (one JSON object a line, flushed at once: the rank may be killed next)."""

    def __init__(self, workdir: str, rank: int, attempt: int):
        d = Path(workdir) / "events"
        d.mkdir(parents=True, exist_ok=True)
        self.f = open(d / f"rank{rank}.jsonl", "a", buffering=1)  # noqa: SIM115 - open for the rank's life
        self.base = {"rank": rank, "attempt": attempt, "pid": os.getpid(), "host": socket.gethostname()}

    def __call__(self, kind: str, **fields) -> None:
        self.f.write(json.dumps({**self.base, "kind": kind, "t": time.time(), **fields}) + "\n")
        self.f.flush()


def digest(model: torch.nn.Module) -> str:
    """sha256 of every parameter's and buffer's bytes, in state_dict order."""
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def batch_indices(step: int, plan: Plan, rank: int) -> torch.Tensor:
    """Rank ``rank``'s samples of step ``step``: a seeded permutation per epoch, cut into global batches."""
    b = plan.batch_per_rank * plan.world
    start = step * b
    epoch, off = divmod(start, N_SAMPLES)
    perm = torch.randperm(N_SAMPLES, generator=torch.Generator().manual_seed(plan.seed * 100_003 + epoch))
    while off + b > perm.numel():  # a global batch that spans two epochs
        epoch += 1
        perm = torch.cat(
            [perm, torch.randperm(N_SAMPLES, generator=torch.Generator().manual_seed(plan.seed * 100_003 + epoch))]
        )
    return perm[off + rank * plan.batch_per_rank : off + (rank + 1) * plan.batch_per_rank]


def checkpoints(workdir: str) -> list[int]:
    """The steps of the complete checkpoints (those whose metadata was written), oldest first."""
    d = Path(workdir) / "ckpt"
    return sorted(int(p.parent.name[4:]) for p in d.glob("step*/.metadata")) if d.is_dir() else []


def restore_steps(plan: Plan, rank: int, attempt: int, steps: list[int]) -> tuple[int, int, int | None]:
    """What rank ``rank`` restores in attempt ``attempt`` from the checkpoints of ``steps`` (oldest first; a step of
    0 is the initial state): (the step it claims, the checkpoint every rank loads together, the one this rank then
    loads alone or None). The claim is the latest; a planted bug that restores an older one (plan.PLANTS) loads
    the one before it after a restart, together where every rank carries it, else alone on the ranks that do."""
    claimed = steps[-1] if steps else 0
    older = steps[-2] if len(steps) > 1 else 0
    plant = PLANTS[plan.bug] if plan.bug else NO_PLANT
    if attempt == 0 or not plant.restores_older:
        return claimed, claimed, None
    if plant.ranks is None:
        return claimed, older, None
    return claimed, claimed, older if plant.carried_by(rank, attempt) else None


def strike(fault, log: Log) -> None:
    log("fault", step=fault.step, fault=fault.kind)
    if fault.kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault.kind == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)  # the runner sends SIGCONT after longer than the timeout
    else:
        raise SystemExit(f"fault class {fault.kind} cannot strike from inside a rank")


class Trainer:
    """One rank's training: the MLP on its seeded data, or SHARDED_MODEL's model (``plan.model``, user.py) on its
    batches' rows."""

    def __init__(self, plan: Plan, rank: int, log: Log):
        self.plan, self.rank, self.log = plan, rank, log
        if plan.model:
            self.yours = Yours(plan.model, plan.world)
            self.loss = self.yours.loss
        else:
            self.yours = None
            self.data = models.make_dataset(n_samples=N_SAMPLES, seed=plan.seed + 1)
            self.loss = torch.nn.CrossEntropyLoss()
        self.ddp = DDP(self.initial())
        self.opt = torch.optim.SGD(self.ddp.parameters(), lr=LR, momentum=MOMENTUM)
        self.pending = None

    def initial(self) -> torch.nn.Module:
        """A new model in its initial state: the seeded MLP, or a copy of the factory's module."""
        return (
            self.yours.module()
            if self.yours
            else models.mlp(models.mlp_spec_for(self.plan.params), seed=self.plan.seed)
        )

    def batch(self, k: int) -> tuple:
        """This rank's inputs and targets of step ``k``."""
        if self.yours:
            return self.yours.shard(k, self.rank)
        return self.data[batch_indices(k, self.plan, self.rank)]

    def state(self) -> dict:
        m, o = get_state_dict(self.ddp, self.opt)
        return {"model": m, "optim": o}

    def restore(self, attempt: int) -> int:
        """Load the latest checkpoint (or what a planted bug loads instead: ``restore_steps``); the step."""
        claimed, together, alone = restore_steps(self.plan, self.rank, attempt, checkpoints(self.plan.workdir))
        t0 = time.perf_counter()
        self.load(together)  # a collective: every rank takes part
        if alone is not None:
            self.load(alone, alone=True)
        load_s = time.perf_counter() - t0 if claimed else 0.0
        self.log("restore", step=claimed, load_s=load_s, digest=self.state_digest())
        return claimed

    def load(self, step: int, alone: bool = False) -> None:
        """The state of the checkpoint of ``step`` (0: nothing to load, the initial state); ``alone``: this rank
        reads it by itself (no collective), and step 0 puts the initial state back."""
        if step:
            sd = self.state()
            dcp.load(sd, checkpoint_id=str(Path(self.plan.workdir) / "ckpt" / f"step{step}"), no_dist=alone)
            set_state_dict(self.ddp, self.opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        elif alone:
            self.ddp.module.load_state_dict(self.initial().state_dict())
            self.opt.state.clear()

    def state_digest(self) -> str:
        return digest(self.ddp.module)

    def step(self, k: int) -> None:
        x, y = self.batch(k)
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=False)
        self.loss(self.ddp(x), y).backward()
        time.sleep(max(0.0, t0 + self.plan.step_pad_s - time.perf_counter()))  # a bigger model's step, if asked
        self.opt.step()
        self.log("commit", step=k + 1, step_s=time.perf_counter() - t0, digest=self.state_digest())

    def save(self, done: int) -> None:
        cid = str(Path(self.plan.workdir) / "ckpt" / f"step{done}")
        t0 = time.perf_counter()
        # Each rank's BatchNorm statistics are its own batch's until DDP broadcasts rank 0's at the next
        # forward; the checkpoint keeps one copy of each buffer, so every rank takes rank 0's first.
        for b in self.ddp.module.buffers():
            dist.broadcast(b, 0)
        if self.plan.ckpt_mode == "async":
            self.wait()
            # a background process of its own writes it (with a process group of its own: the training's
            # Gloo group cannot serve a second thread's collectives)
            self.pending = dcp.async_save(self.state(), checkpoint_id=cid, async_checkpointer_type=PROCESS)
        else:
            dcp.save(self.state(), checkpoint_id=cid)
        self.log("save", step=done, save_s=time.perf_counter() - t0)

    def wait(self) -> None:
        if self.pending is not None:
            self.pending.result()
            self.pending = None


def train(plan: Plan, rank: int, attempt: int, log: Log) -> None:
    mine = [f for f in plan.faults if f.at_s is None]  # wall-clock faults are the runner's (wall.py)
    fault = mine[attempt] if attempt < len(mine) else None
    tr = Trainer(plan, rank, log)
    start = tr.restore(attempt)
    for k in range(start, plan.steps):
        if fault is not None and fault.rank == rank and fault.step == k:
            strike(fault, log)
        tr.step(k)
        if (k + 1) % plan.ckpt_every == 0 and k + 1 < plan.steps:
            tr.save(k + 1)
    tr.wait()
    log("done", step=plan.steps, digest=tr.state_digest())


def job_attempt(plan: Plan, env=os.environ) -> int:
    """This rank's attempt: torchrun's restart count where one agent runs the job. Across nodes each agent counts
    its own (one that restarts for another node's failure does not count it), so there the attempt is the job's
    rendezvous round, named by the address each round hands its ranks (``MASTER_ADDR:MASTER_PORT``, a new port a
    round) and numbered in the order the rounds' ranks first start (``<workdir>/rounds``, under a lock)."""
    if plan.nnodes == 1:
        return int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
    key = f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    with open(Path(plan.workdir) / "rounds", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        rounds = f.read().split()
        if key not in rounds:
            f.write(key + "\n")
            rounds.append(key)
        return rounds.index(key)


def gloo_interface(env=os.environ) -> None:
    """A compose node taken off its network and connected again comes back under a new interface name (docker
    names it eth1, eth2, ...; same address): GLOO_SOCKET_IFNAME then names the node's one interface that is not
    loopback."""
    name = env.get("GLOO_SOCKET_IFNAME")
    present = [n for _, n in socket.if_nameindex()]
    if name and name not in present:
        others = [n for n in present if n != "lo"]
        if len(others) == 1:
            env["GLOO_SOCKET_IFNAME"] = others[0]


def main(argv: list[str]) -> int:
    plan = Plan.from_json(json.loads(Path(argv[0]).read_text()))
    rank, attempt = int(os.environ["RANK"]), job_attempt(plan)
    gloo_interface()
    torch.set_num_threads(1)
    log = Log(plan.workdir, rank, attempt)

    def on_term(signum, frame):  # the agent stops the group after another rank failed
        log("detect", how=f"signal {signum}")
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    # a store of this attempt's own: the agent's store still holds the last attempt's Gloo addresses, which a
    # restarted rank can read before its peer has written its new one
    store = dist.FileStore(str(Path(plan.workdir) / f"store.attempt{attempt}"), plan.world)
    # every rank of the attempt up before the group's short timeout counts: the agents of a job that spans nodes
    # start their ranks at different times
    store.set(f"up{rank}", "1")
    store.wait([f"up{r}" for r in range(plan.world)], timedelta(seconds=START_TIMEOUT_S))
    try:
        dist.init_process_group(
            "gloo", store=store, rank=rank, world_size=plan.world, timeout=timedelta(seconds=plan.timeout_s)
        )
        train(plan, rank, attempt, log)
    except Exception as e:  # a peer lost (the collective failed or timed out), or this node's network
        log("detect", how=f"{type(e).__name__}: {str(e)[:200]}")
        os._exit(1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
