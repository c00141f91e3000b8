"""Pipeline strategies of the sharded experiment: ``torch.distributed.pipelining`` schedules on the same model.

The model's layers (``SHARDED_DEPTH`` blocks, then the head) are cut into contiguous stages of at least one
layer (``stage_layers``; later stages take the remainder, so the head's stage is never the lighter one); a
pipeline whose stages outnumber them takes the fewest blocks that give each stage one (ShardedSettings.for_strategy).
``pp_gpipe`` (``ScheduleGPipe``) and ``pp_1f1b`` (``Schedule1F1B``) run one stage per rank; ``pp_interleaved``
(``ScheduleInterleaved1F1B``) runs 2 per rank, stage s on rank s mod world (the looped placement of
Narayanan et al., SC'21). Every step splits the global batch into ``SHARDED_MICROBATCHES`` micro-batches
(rows in order), takes the mean-squared error per micro-batch and divides the accumulated gradients by the
micro-batch count (the schedules' ``scale_grads``), so the step trains what one process trains on the
whole batch. ``pp_unscaled`` (planted) leaves that division out: the classic micro-batching bug, gradients
``SHARDED_MICROBATCHES`` times too large. ``pp_misrouted`` (planted) hands the last stage the targets one
micro-batch out of step with the inputs the first stage sent (a target split that does not follow the
schedule's): every loss compares a micro-batch with another one's rows.

Checked (experiments/sharded/check.py): each rank's stage parameters against the single-process reference
whose batch is split into as many shards as there are micro-batches (the shards' gradients summed in order
and scaled, as the schedule accumulates them): exact when the micro-batch count is a power of two (the
scaling is then exact), else a tolerance with R = micro-batches.

Inventoried: ``CommDebugMode`` lists no point-to-point op (``c10d.send`` / ``c10d.recv_`` are not in its
collective set) and, in torch 2.13, cannot even run a micro-batched step: its module tracker registers one
more forward hook each time a module runs, and the second run of a module pops its parent list empty
(IndexError). So ``P2PInventory``, a plain ``TorchDispatchMode``, lists every c10d op the step dispatches
(send, recv, and any collective): op, dtype, bytes, peer; a stage subclass notes which buffers its
forward (activations) and backward (gradients) p2p ops carry, which names each op's phase. Every rank's list
is gathered. As every strategy's inventory is, it is checked against c10d's own count over the same step:
on any rank a count above what the inventory saw there (an op from another thread, which a dispatch mode
does not see) fails the case. Gloo counts each send and recv (equal, measured on torch 2.13); NCCL's
sequence number leaves p2p ops out, so there fewer is no failure and the check is weak (an extra collective
is caught only when the step's collectives outnumber its p2p ops). ``theory`` derives the same from the
shapes: per stage boundary, per micro-batch, one activation forward and one gradient backward, so
2 x (stages - 1) x micro-batches messages of A bytes, A = 4 x (batch / micro-batches) x seq x width.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from suite.api import NeedsRanks

from . import internals, inventory, workload
from .strategies import PLANTED, STRATEGIES
from .strategies import get as strategy_of

PIPELINES = frozenset(n for n, st in (STRATEGIES | PLANTED).items() if st.pipeline is not None)
"""Every pipeline strategy, planted included."""


def stages_per_rank(strategy: str) -> int:
    return strategy_of(strategy).pipeline.stages_per_rank


def stage_bounds(layers: int, stages: int) -> list[tuple[int, int]]:
    """[start, end) indices of each stage over ``layers`` layers in order (a user model's: its pp_layers)."""
    return [(i * layers // stages, (i + 1) * layers // stages) for i in range(stages)]


def stage_layers(depth: int, stages: int) -> list[tuple[int, int]]:
    """[start, end) layer indices of each stage over the ``depth + 1`` layers (blocks, then the head)."""
    return stage_bounds(depth + 1, stages)


def cannot_run(strategy: str, world: int, depth: int, microbatches: int, pieces: int | None = None) -> str | None:
    """Why a pipeline strategy cannot run here (the same on every rank), naming the knob; None otherwise
    (and for every other strategy). ``pieces``: a user model's pp_layers count, in place of depth + 1."""
    if strategy not in PIPELINES:
        return None
    if world < 2:
        return NeedsRanks(2, f"{strategy} needs at least 2 ranks (one stage per rank), not {world}")
    stages = world * stages_per_rank(strategy)
    if pieces is not None and pieces < stages:
        return f"{strategy} needs {stages} stages at {world} ranks, and the model's pp_layers has {pieces} pieces"
    if pieces is None and depth + 1 < stages:
        return (
            f"{strategy} needs SHARDED_DEPTH >= {stages - 1} at {world} ranks ({stages} stages of at least one layer: "
            f"SHARDED_DEPTH={depth} blocks and the head are {depth + 1})"
        )
    return strategy_of(strategy).pipeline.cannot(world, microbatches)


def bubble_fraction(strategy: str, world: int, microbatches: int) -> float:
    """Idle fraction of a rank's step with equal stages and free transfers: (p - 1) / (v m + p - 1) for p
    ranks, m micro-batches and v stages per rank (GPipe and 1F1B: v = 1, Huang et al. 2019; interleaved:
    the bubble shrinks by v, Narayanan et al., SC'21, section 2.2.2)."""
    v = stages_per_rank(strategy)
    return (world - 1) / (v * microbatches + world - 1)


def activation_bytes(width: int, seq: int, batch: int, microbatches: int) -> int:
    """A: bytes of one micro-batch's activation (float32), what crosses a stage boundary each way."""
    return 4 * (batch // microbatches) * seq * width


def _p2p_row(rank, op, peer, phase, nbytes, dtype, count) -> dict:
    return {
        "rank": rank,
        "op": op,
        "peer": peer,
        "dtype": dtype,
        "bytes": nbytes,
        "group": "pp",
        "phase": phase,
        "count": count,
    }


def theory(strategy: str, width: int, seq: int, batch: int, world: int, microbatches: int) -> list[dict]:
    """Every rank's p2p ops of one step from the shapes: every boundary's activation A bytes of float32."""
    stages = world * stages_per_rank(strategy)
    a = activation_bytes(width, seq, batch, microbatches)
    return boundary_theory(world, microbatches, [(a, "float32")] * (stages - 1))


def boundary_theory(world: int, microbatches: int, boundaries: list[tuple[int, str]]) -> list[dict]:
    """Every rank's p2p ops of one step: for each boundary between stage s (on rank s mod world) and s + 1, whose
    activation is ``boundaries[s]`` (bytes, dtype) for one micro-batch, m activations sent forward and m gradients
    (the same shape) back, each a send on one rank and a recv on the other."""
    ops: Counter = Counter()
    for s, (nbytes, dtype) in enumerate(boundaries):
        a, b = s % world, (s + 1) % world
        ops[(a, "send", b, "forward", nbytes, dtype)] += microbatches
        ops[(b, "recv", a, "forward", nbytes, dtype)] += microbatches
        ops[(b, "send", a, "backward", nbytes, dtype)] += microbatches
        ops[(a, "recv", b, "backward", nbytes, dtype)] += microbatches
    return _rows(ops)


def _rows(ops: Counter) -> list[dict]:
    """Rows from (rank, op, peer, phase, bytes, dtype) -> count, in a fixed order."""
    rows = [_p2p_row(*key, n) for key, n in ops.items()]
    return sorted(rows, key=lambda r: (r["rank"], r["op"], r["phase"], str(r["peer"]), r["bytes"]))


def sent_bytes(rows: list[dict]) -> dict[int, int]:
    """Bytes each rank sends in a step (its send rows)."""
    out: dict[int, int] = {}
    for r in rows:
        if r["op"] == "send":
            out[r["rank"]] = out.get(r["rank"], 0) + r["count"] * r["bytes"]
    return out


def theory_bytes(strategy: str, width: int, seq: int, batch: int, world: int, microbatches: int) -> int:
    """S of one step: every message once, 2 x (stages - 1) x micro-batches x A."""
    return sum(sent_bytes(theory(strategy, width, seq, batch, world, microbatches)).values())


# --- on a rank ------------------------------------------------------------------------------------------


def _stage_class():
    from torch.distributed.pipelining import PipelineStage

    class NotedStage(PipelineStage):
        """A PipelineStage that notes, for each p2p op it hands the schedule, the buffer and the phase
        (forward: activations; backward: gradients), so the inventory can name the phase of what it sees."""

        def __init__(self, *args, phases: dict[int, str], **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.noted_phases = phases
            self.noted_ops = 0

        def _noted(self, ops: list, phase: str) -> list:
            for op in ops:
                self.noted_phases[op.tensor.data_ptr()] = phase
            self.noted_ops += len(ops)
            return ops

        def get_fwd_recv_ops(self, fwd_chunk_id: int) -> list:
            return self._noted(super().get_fwd_recv_ops(fwd_chunk_id), "forward")

        def get_fwd_send_ops(self, fwd_chunk_id: int) -> list:
            return self._noted(super().get_fwd_send_ops(fwd_chunk_id), "forward")

        def get_bwd_recv_ops(self, bwd_chunk_id: int) -> list:
            return self._noted(super().get_bwd_recv_ops(bwd_chunk_id), "backward")

        def get_bwd_send_ops(self, bwd_chunk_id: int) -> list:
            return self._noted(super().get_bwd_send_ops(bwd_chunk_id), "backward")

    return NotedStage


@dataclass
class PipelineTrainer(workload.Trainer):
    """A rank's stages and their schedule's step (``model``: the stages' layers, in the model's order)."""

    stages: list = field(default_factory=list)
    """This rank's NotedStage objects."""
    phases: dict[int, str] = field(default_factory=dict)
    """Buffer address -> forward | backward, as the stages noted their p2p ops."""


def build_trainer(strategy: str, ctx, net: nn.Module, layers: list, batches: list, loss, microbatches: int):
    """This rank's stages of ``net``, whose forward is ``layers`` in order, under ``strategy``'s schedule, its SGD
    and its step on the global ``batches`` with ``loss`` per micro-batch (``Trainer.owned``: which of ``net``'s
    parameters this rank holds, in order)."""
    import torch.distributed.pipelining as pipelining

    world, rank, device = ctx.world_size, ctx.rank, ctx.device
    v = stages_per_rank(strategy)
    stages = world * v
    bounds = stage_bounds(len(layers), stages)
    mine = [rank + k * world for k in range(v)]
    phases: dict[int, str] = {}
    modules = [nn.Sequential(*layers[slice(*bounds[s])]) for s in mine]
    stage_cls = _stage_class()
    # No shapes given: the stages infer them (send_object_list between neighbours) in their set-up, below.
    # Given (the schedule's STATIC mode), torch 2.13 fails backward ("grad can be implicitly created only for
    # scalar outputs"), and with the gradients' shapes given too it trains wrong parameters (measured here).
    built = [
        stage_cls(mod, s, stages, device, group=ctx.group, phases=phases) for mod, s in zip(modules, mine, strict=True)
    ]
    pipe = strategy_of(strategy).pipeline
    schedule_cls = getattr(pipelining, pipe.schedule)
    kw = {"n_microbatches": microbatches, "loss_fn": loss, "scale_grads": pipe.scale_grads}
    schedule = schedule_cls(built if v > 1 else built[0], **kw)
    model = nn.ModuleList(modules)
    index = {id(p): i for i, p in enumerate(net.parameters())}
    opt = torch.optim.SGD(model.parameters(), lr=workload.LR)
    first, last = 0 in mine, stages - 1 in mine
    trainer = PipelineTrainer(
        strategy=strategy,
        model=model,
        step=lambda: None,
        groups={ctx.group.group_name: "pp"},
        owned=[index[id(p)] for p in model.parameters()],
        stages=built,
        phases=phases,
    )

    def step() -> None:
        x, y = batches[trainer.steps % workload.BATCHES]
        opt.zero_grad()
        if pipe.targets_shift:  # planted: each micro-batch meets the next one's targets
            y = torch.roll(y, shifts=y.shape[0] // microbatches, dims=0)
        schedule.step(*((x,) if first else ()), **({"target": y} if last else {}))
        opt.step()
        trainer.steps += 1

    trainer.step = step
    # the stages' set-up (a vote and their shapes, sent between neighbours) before the first step: what the case
    # calls, checks and times is training steps only
    x, y = batches[0]
    internals.set_up_stages(
        schedule, (x.tensor_split(microbatches)[0],) if first else (), y.tensor_split(microbatches)[0] if last else None
    )
    return trainer


class P2PInventory(internals.dispatch_mode_base()):
    """Lists every c10d op dispatched while active (``ops``: op, peer, phase, bytes); the phase is looked up
    by buffer in ``phases`` (what the stages noted), ``unknown`` where no stage noted the buffer."""

    def __init__(self, phases: dict[int, str]) -> None:
        super().__init__()
        self.phases = phases
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = internals.packet_name(func)
        if name.startswith("c10d."):
            flat = internals.leaves(args, kwargs)
            tensors = [a for a in flat if isinstance(a, torch.Tensor)]
            ints = [a for a in flat if isinstance(a, int) and not isinstance(a, bool)]
            short = name.split(".", 1)[1].strip("_")
            op = {"send": "send", "recv": "recv", "recv_any_source": "recv"}.get(short, inventory.op_name(name))
            peer = ints[0] if op in ("send", "recv") and ints else None
            phase = self.phases.get(tensors[0].data_ptr(), internals.UNKNOWN) if tensors else internals.UNKNOWN
            dtype = str(tensors[0].dtype).removeprefix("torch.") if tensors else "none"
            self.ops[(op, peer, phase, sum(t.numel() * t.element_size() for t in tensors), dtype)] += 1
        return func(*args, **(kwargs or {}))


def inventory_step(trainer, ctx) -> tuple[list[dict], int, dict[str, int] | None]:
    """One more step under ``P2PInventory``: every rank's rows (gathered: a collective on every rank), the
    p2p ops the stages handed the schedule in that step, summed over ranks, and this rank's c10d count over
    the step (inventory.issued). CaseFailed on every rank when on any rank c10d counted more ops than the
    inventory saw there (an op from another thread: inventory.complete)."""
    import torch.distributed as dist

    before = sum(s.noted_ops for s in trainer.stages)
    issued = internals.c10d_issued(trainer.groups)
    with P2PInventory(trainer.phases) as inv:
        trainer.step()
    c10d = inventory.issued(issued, internals.c10d_issued(trainer.groups), trainer.groups)
    # Gloo counts each send and recv, NCCL its collectives only: more than the inventory saw is an op it missed
    inventory.complete(trainer.strategy, [{"group": "pp", "count": sum(inv.ops.values())}], c10d, ctx, at_most=True)
    noted = sum(s.noted_ops for s in trainer.stages) - before
    mine = Counter({(ctx.rank, *key): n for key, n in inv.ops.items()})
    every: list = [None] * ctx.world_size
    dist.all_gather_object(every, (mine, noted), group=ctx.group)
    return _rows(sum((c for c, _ in every), Counter())), sum(n for _, n in every), c10d


def p2p_fields(rows: list[dict], scheduled: int, c10d: dict | None, want: list[dict], ddp: list[dict], world: int):
    """The record's inventory fields of a pipeline case from every rank's rows, the p2p ops its stages scheduled,
    rank 0's c10d count, theory's rows and DDP's collectives on the same model (pure; PROVENANCE)."""
    ddp_bus = inventory.bus_bytes(ddp, {"dp": world}, gloo=False)
    sent = sent_bytes(rows)
    bus = max(sent.values(), default=0)
    return {
        "inventory": rows,
        "inventory_bytes": sum(sent.values()),
        "inventory_ops": sum(r["count"] for r in rows if r["op"] == "send"),
        "p2p_ops_dispatched": sum(r["count"] for r in rows),
        "p2p_ops_scheduled": scheduled,
        "commdebug_ops": None,
        "c10d_ops": c10d,
        "theory": want,
        "theory_bytes": sum(sent_bytes(want).values()),
        "inventory_matches_theory": rows == want,
        "bus_bytes": bus,
        "bus_bytes_gloo": bus,
        "ddp_bus_bytes": ddp_bus,
        "bus_vs_ddp": bus / ddp_bus if ddp_bus else None,
    }


def declared_fields(strategy: str, s, world: int) -> dict:
    """A pipeline case's fields known before it runs (the built-in model's)."""
    bounds = stage_layers(s.depth, world * stages_per_rank(strategy))
    return stage_fields(
        strategy, world, s.microbatches, bounds, activation_bytes(s.width, s.seq, s.batch, s.microbatches)
    )


def stage_fields(strategy: str, world: int, microbatches: int, bounds: list, activation: int) -> dict:
    """A pipeline case's fields from its stages' [start, end) layers and the activation one micro-batch sends."""
    v = stages_per_rank(strategy)
    fields = {
        "schedule": strategy_of(strategy).pipeline.schedule,
        "stages": world * v,
        "stages_per_rank": v,
        "stage_layers": [list(b) for b in bounds],
        "activation_bytes": activation,
        "bubble_fraction": bubble_fraction(strategy, world, microbatches),
        "check": "each rank's stage parameters equal single-process training on the global batches split "
        "into the micro-batches (check_rule)",
        "cpu_notes": "CPU: Gloo send/recv between neighbouring stages; bubble_fraction is modelled (equal stages, "
        "free transfers), not measured",
    }
    if planted := strategy_of(strategy).planted:
        fields["planted"] = f"wrong on purpose (the check's own test): {planted}"
    return fields


PROVENANCE = {
    "inventory": "measured: a TorchDispatchMode (experiments.sharded.pipeline.P2PInventory) around one step after "
    "the timed steps, every rank's c10d ops gathered: rank, op (send/recv), peer, dtype, bytes, phase (forward: "
    "activations, backward: gradients, as the stages noted their p2p buffers); CommDebugMode lists no p2p op and "
    "fails on a micro-batched step in torch 2.13",
    "inventory_bytes": "derived: sum of count x bytes over the inventory's sends (each message once)",
    "inventory_ops": "derived: messages (sends) of one step over all ranks",
    "p2p_ops_dispatched": "derived: sum of count over the inventory (sends and recvs, all ranks)",
    "p2p_ops_scheduled": "measured: the P2POps the stages handed the schedule in the same step, all ranks",
    "commdebug_ops": "none: CommDebugMode cannot run a micro-batched step (module tracker, torch 2.13)",
    "c10d_ops": "measured: rank 0's change of c10d's sequence number of the pipeline's group over the same step "
    "(every op issued on it, any thread; Gloo counts each send and recv, NCCL its collectives only); on any rank "
    "a count above the ops its inventory saw fails the case",
    "theory": "modelled: experiments.sharded.pipeline.theory from width, seq, batch, micro-batches and world",
    "theory_bytes": "derived: 2 x (stages - 1) x micro-batches x activation_bytes",
    "inventory_matches_theory": "derived: the inventory's rows equal theory's (rank, op, peer, phase, bytes, count)",
    "bus_bytes": "derived: the largest bytes one rank sends per step (sum of its sends)",
    "bus_bytes_gloo": "derived: as bus_bytes (no collective)",
    "bubble_fraction": "modelled: (p - 1) / (v m + p - 1), p ranks, m micro-batches, v stages per rank, "
    "equal stages and free transfers (GPipe/1F1B; interleaved: Narayanan et al. SC'21)",
    "activation_bytes": "modelled: 4 x (batch / micro-batches) x seq x width",
    "depth_raised_from": "set: SHARDED_DEPTH, whose blocks and head are fewer layers than the stages; the case's "
    "depth is stages - 1, each stage one layer (experiments.sharded.settings.ShardedSettings.for_strategy)",
}
