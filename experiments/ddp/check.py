"""The ddp experiment's check: every synchronised case against single-process training (``Reference``) under
``check_rule`` (suite/harness/sgd_rule.py; the rule and its bound are in cases.py's docstring), and each rank's
BatchNorm buffers against the reference's for that rank."""

from __future__ import annotations

import copy
import time

import torch
import torch.nn as nn

from suite.api import DistContext, Session, sgd_rule

from . import buffer_bound
from . import models as training
from . import workload

_WIRE = {
    "fp16_compress": ("float16", 2.0**-11, 2.0**-24),
    "fp16_scaled": ("float16", 2.0**-11, 2.0**-24),
    "bf16_compress": ("bfloat16", 2.0**-8, 0.0),
}
"""Hooks that compress the gradient on the wire: (dtype, unit roundoff, absolute error of its subnormals)."""


TIMED_ONLY = (
    "DDP_TIMED_ONLY=1: timed only, not compared with single-process training (a fail-slow bench's trial scores "
    "detection, not exactness)"
)
"""The reason a training step case is unchecked under DDP_TIMED_ONLY=1."""


def unchecked_reason(v: workload.Variant, settings: workload.DdpSettings) -> str | None:
    if settings.timed_only and v.kind.trains:
        return TIMED_ONLY
    if not v.kind.communicates:
        return (
            "no communication: a single-process step has nothing to compare with but itself "
            "(the synchronised cases are checked against single-process training)"
        )
    if v.hook == workload.NOOP:
        return "no communication by design: each rank keeps its own gradient, so ranks diverge"
    if v.hook == "powerSGD":
        return (
            "PowerSGD is a low-rank approximation with error feedback: its distance from exact averaging "
            "depends on the gradients' spectrum, no tolerance follows from the compression alone"
        )
    return None


def check_rule(v: workload.Variant, world: int) -> sgd_rule.SgdRule:
    """The rule of ``v`` at ``world`` ranks (cases.py's docstring): R = the world, u and a from the dtype the
    gradient travels in; exact with a float32 wire at 1 or 2 ranks (a sum of two terms is commutative and halving
    exact)."""
    wire, u, a = _WIRE.get(v.hook or "", ("float32", sgd_rule.U32, 0.0))
    why = "float32 sum order" if wire == "float32" else f"{wire} wire"
    exact = wire == "float32" and world <= 2
    return sgd_rule.SgdRule(world=world, terms=world, u=u, lr=training.SOURCE.lr, exact=exact, why=why, abs_err=a)


FORMULA = (
    "per element: " + sgd_rule.SgdRule.FORMULA + ", S steps, R the world, max|g_x| and max|p_x| the element's largest "
    "averaged gradient term and parameter so far"
)
"""The bound the record's ``check_tol`` is the largest of."""


CHECKPOINT_EVERY = 5
"""The reference keeps its whole state every this many steps: a case asking for fewer steps than an earlier
one took (each case's sample budget decides its count) resumes from the checkpoint below, not from step 0."""
CHECKPOINT_BYTES = 256 << 20
"""At most this many bytes of checkpoints are kept (the oldest go first): a large DDP_PARAMS keeps fewer."""


class Reference:
    """Single-process SGD on the global batches of ``world`` ranks: every rank's (micro-)batch through the
    same forward and backward as that rank runs, the ranks' gradients averaged in rank order (sum of
    g_r x 1/N, the value a correct all_reduce average has), where DDP averages them (every micro-batch
    with ``sync_each``, else once per step), then the same SGD step. No torch.distributed."""

    def __init__(
        self,
        model: str,
        settings: workload.DdpSettings,
        world: int,
        device,
        micro: int,
        sync_each: bool,
        sync_buffers: bool,
        seed: int = 0,
    ):
        self.seed = seed  # the initial weights' (workload.build_model): the checked ranks' (Step.seed)
        self._args = (model, settings, world, device, micro, sync_each, sync_buffers)
        self._checkpoints: dict[int, tuple] = {}
        self._start()
        self._snapshots: dict[int, tuple[torch.Tensor, ...]] = {}
        self._events_at: dict[int, list] = {}
        self._grads: dict[int, torch.Tensor | None] = {}  # per snapshot, its last step's averaged gradient
        """Per snapshot, the events up to it (``buffer_tol``); kept, as the snapshots are, across rewinds."""

    def _start(self) -> None:
        """A fresh model at step 0."""
        model, settings, world, device, micro, sync_each, sync_buffers = self._args
        self.net = workload.build_model(model, settings, seed=self.seed).to(device)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=training.SOURCE.lr)
        self.loss_fn = nn.CrossEntropyLoss()
        self.batches = [workload.rank_batches(r, settings, micro, device) for r in range(world)]
        self.world, self.micro, self.sync_each, self.sync_buffers = world, micro, sync_each, sync_buffers
        self.steps = 0
        self.p_max = training.flat_params(self.net).abs()
        self.g_max = torch.zeros_like(self.p_max)
        self.bufs = [[b.detach().clone() for b in self.net.buffers()] for _ in range(world)]
        """Each rank's buffers (BatchNorm running stats and count) as that rank holds them."""
        self.bn = buffer_bound.bn_after_linear(self.net)
        """The (Linear, BatchNorm) whose running stats get a bound (under a tolerance rule: buffer_tol)."""
        self._offset = None if self.bn is None else training.param_offset(self.net, self.bn[0].weight)
        """Where that Linear's weight starts in the flat parameters (fixed per model)."""
        self.events: list[list] = []
        """Per step, the forwards' terms and the buffer broadcasts (buffer_bound), in the order they ran."""
        self._largest = (0.0, 0.0)
        self.last_grad: torch.Tensor | None = None
        """The last step's averaged gradient, flat (None before any step, and after a rewind)."""

    def _p_max(self) -> torch.Tensor:
        """Per element: the largest |parameter| so far."""
        return torch.maximum(self.p_max, training.flat_params(self.net).abs())

    def _local(self, r: int, x, y) -> list[torch.Tensor]:
        """Rank ``r``'s forward (from and into its own buffers) and backward; its gradients."""
        with torch.no_grad():
            for b, mine in zip(self.net.buffers(), self.bufs[r]):
                b.copy_(mine)
        self.net.zero_grad(set_to_none=False)
        seen: list[torch.Tensor] = []  # the BatchNorm's input, where its running stats get a bound
        hook = None if self.bn is None else self.bn[1].register_forward_pre_hook(lambda m, a: seen.append(a[0]))
        loss = self.loss_fn(self.net(x), y)
        if hook is not None:
            hook.remove()
        if self.bn is not None:  # before backward: the parameters this forward saw
            lin, bn = self.bn
            t = buffer_bound.terms(r, self.steps, x, seen[0], lin, self.g_max, self.p_max, self._offset, self._largest)
            self.events[-1].append(buffer_bound.after(t, bn, self.bufs[r], seen[0]))
        (loss / self.micro if self.micro > 1 else loss).backward()  # as training.local_step / _accum_step
        self.bufs[r] = [b.detach().clone() for b in self.net.buffers()]
        return [p.grad.clone() for p in self.net.parameters()]

    def _broadcast_buffers(self, i: int) -> None:
        """DDP's buffer sync before micro-batch ``i``'s forward: every rank takes rank 0's buffers when
        ``sync_buffers`` and the previous forward synchronised gradients (DDP's require_forward_param_sync:
        every micro-batch with sync_each, only the first under no_sync)."""
        if self.sync_buffers and (i == 0 or self.sync_each):
            self.bufs = [[b.clone() for b in self.bufs[0]] for _ in range(self.world)]
            self.events[-1].append(buffer_bound.BROADCAST)

    def _mean(self, per_rank: list[list[torch.Tensor]]) -> list[torch.Tensor]:
        inv = 1.0 / self.world
        for ts in per_rank:  # per element: the largest |term| ever averaged
            self.g_max = torch.maximum(self.g_max, torch.cat([t.reshape(-1) for t in ts]).abs())
        out = []
        for ts in zip(*per_rank):
            acc = ts[0] * inv
            for t in ts[1:]:
                acc = acc + t * inv
            out.append(acc)
        return out

    def _step(self) -> None:
        avg: list | None = None
        acc: list | None = None
        self.events.append([])
        if self.bn is not None:  # the rule's carried term: the largest max|g| and max|p| of the steps so far
            self._largest = (float(self.g_max.max()), float(self.p_max.max()))
        for i in range(self.micro):
            self._broadcast_buffers(i)
            local = [self._local(r, *self.batches[r][i]) for r in range(self.world)]
            if self.sync_each:  # DDP averages what autograd accumulated: the last average + this gradient
                avg = self._mean(local if avg is None else [[a + g for a, g in zip(avg, gs)] for gs in local])
            else:  # no_sync: local accumulation, one average at the end
                acc = local if acc is None else [[a + g for a, g in zip(ar, gs)] for ar, gs in zip(acc, local)]
        if avg is None:
            avg = self._mean(acc)
        for p, g in zip(self.net.parameters(), avg):
            p.grad.copy_(g)
        self.last_grad = torch.cat([g.reshape(-1) for g in avg])
        self.opt.step()
        self.steps += 1
        self.p_max = self._p_max()
        if self.steps % CHECKPOINT_EVERY == 0:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Keep the whole state at this step (parameters and the net's buffers, the optimizer's state, every
        rank's buffers, max|g| and max|p|), within CHECKPOINT_BYTES."""
        state = (
            {k: v.detach().clone() for k, v in self.net.state_dict().items()},
            copy.deepcopy(self.opt.state_dict()),
            [[b.clone() for b in bs] for bs in self.bufs],
            self.g_max.clone(),
            self.p_max.clone(),
        )
        self._checkpoints[self.steps] = state
        size = training.tensor_bytes(state)
        while len(self._checkpoints) > 1 and size * len(self._checkpoints) > CHECKPOINT_BYTES:
            del self._checkpoints[min(self._checkpoints)]

    def _rewind(self, steps: int) -> None:
        """Back to the latest checkpoint at or before ``steps`` (step 0: a fresh model)."""
        at = max((k for k in self._checkpoints if k <= steps), default=0)
        if at == 0:
            self._start()
            return
        params, opt, bufs, g_max, p_max = self._checkpoints[at]
        self.net.load_state_dict(params)
        self.opt.load_state_dict(copy.deepcopy(opt))
        self.bufs = [[b.clone() for b in bs] for bs in bufs]
        self.g_max, self.p_max, self.steps = g_max.clone(), p_max.clone(), at
        self.events = self.events[:at]
        self.last_grad = None

    def advance(self, steps: int, deadline: float) -> bool:
        """Toward ``steps`` steps, until ``deadline`` (``time.monotonic``) and at least one step: whether ``at(steps)``
        now takes no more steps (the reference trained in turns: compare.in_turns)."""
        if steps in self._snapshots:
            return True
        if steps < self.steps:
            self._rewind(steps)
        while self.steps < steps:
            self._step()
            if time.monotonic() >= deadline:
                break
        return self.steps >= steps

    def at(self, steps: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Flat parameters after ``steps`` steps, per element max|g|, max|p| up to then, and every rank's
        flat buffers (float64, one row per rank: ``flat_buffers``) (snapshots are kept)."""
        if steps not in self._snapshots:
            if steps < self.steps:  # this case ran fewer steps than an earlier one (its budget, precision mode)
                self._rewind(steps)
            while self.steps < steps:
                self._step()
            bufs = torch.stack([flat_buffers(bs) for bs in self.bufs])
            self._events_at[steps] = [e for step in self.events[:steps] for e in step]
            self._grads[steps] = self.last_grad
            self._snapshots[steps] = (
                training.flat_params(self.net).clone(),
                self.g_max.clone(),
                self.p_max.clone(),
                bufs,
            )
        return self._snapshots[steps]

    def grad_at(self, steps: int) -> torch.Tensor | None:
        """The averaged gradient of step ``steps`` (``at(steps)`` first), flat; None where it was not kept."""
        return self._grads.get(steps)

    def buffer_tol(self, steps: int, rule: sgd_rule.SgdRule) -> torch.Tensor | None:
        """Per rank (rows) and flat buffer element, how far that rank's buffers may lie from the reference's
        after ``steps`` steps (``at(steps)`` first) under ``rule`` (buffer_bound); None where no bound is
        derived (this model) or needed (an exact rule)."""
        if self.bn is None or rule.exact:
            return None
        return buffer_bound.tolerance(self._events_at[steps], self.world, rule, float(self.bn[1].momentum))


def flat_buffers(buffers) -> torch.Tensor:
    """Buffers (float32 running stats, int64 counts) as one float64 vector: every value exactly."""
    return torch.cat([b.detach().reshape(-1).double() for b in buffers]) if buffers else torch.zeros(0).double()


def syncs_buffers(v: workload.Variant) -> bool:
    """Whether every forward of ``v`` starts from rank 0's buffers: DDP's default (``broadcast_buffers``);
    without it, and in the manual cases (no DDP), each rank's BatchNorm keeps its own running stats."""
    return v.kind.ddp_wrapped and dict(v.ddp_kwargs).get("broadcast_buffers", True)


def shared_reference(
    session: Session, ctx: DistContext, v: workload.Variant, settings: workload.DdpSettings, seed: int
) -> Reference:
    """The reference of ``v``'s kind from initial weights ``seed``. The session keeps each kind's seed-0 reference
    (the timed steps', shared by every case of the kind: workload.prepare) and the last other seed's (a check run's)."""
    micro = workload.micro_batches(v, settings)
    sync_each = v.kind.accumulates and not v.no_sync
    key = (workload.EXPERIMENT, "reference", id(ctx.group), v.model, micro, sync_each, syncs_buffers(v))
    held = session.once(key, dict)
    if seed not in held:
        for old in [s for s in held if s != 0]:
            del held[old]
        held[seed] = Reference(v.model, settings, ctx.world_size, ctx.device, micro, sync_each, syncs_buffers(v), seed)
    return held[seed]


def buffer_rule(v: workload.Variant, rule: sgd_rule.SgdRule, bounded: bool = True) -> str:
    """How a rank's buffers are compared with the reference's for that rank (module docstring); ``bounded``:
    the model's running stats get a bound after the timed steps (buffer_bound.bn_after_linear)."""
    whose = (
        "rank 0's broadcast before each forward that follows a gradient sync, then the rank's own batches"
        if syncs_buffers(v)
        else "the rank's own batches"
    )
    if rule.exact:
        return f"exact ({whose})"
    after = (
        "after the timed steps within a bound per element derived from the parameters' tol "
        "(experiments/ddp/buffer_bound.py; the batch count exact)"
        if bounded
        else "not compared after the timed steps (no bound for this model's running stats derived)"
    )
    return (
        f"exact after the one-step check ({whose}; its forwards saw the initial parameters, the same on every "
        f"rank and in the reference); {after}"
    )


def buffers_compared(rule: sgd_rule.SgdRule, steps: int, bounded: bool = True) -> bool:
    """Whether the buffers are compared after ``steps`` optimizer steps: always under the exact rule and where
    they have a bound (``bounded``); else only after the one-step check, where every forward ran on the initial
    parameters (bit-identical on every rank and in the reference), so the running stats moved by the same
    batches are too."""
    return rule.exact or steps == 1 or bounded
