"""What each ddp case runs on one rank: the variants' models, batches and communication hooks, the DDP,
manual and accumulation steps, the single-process reference and its check rule, and the numbers derived
from the timed steps (baselines, overlap, DDP's logger, buckets). The declarations are in cases.py."""

from __future__ import annotations

import contextlib
import copy
import inspect
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from suite.api import (
    Buffers,
    DistContext,
    Session,
    dist_max,
    dist_min,
    verify,
)

from . import internals
from . import models as training
from .settings import DdpSettings

EXPERIMENT = "ddp"


Settings = DdpSettings
"""The experiment's knobs: ``cfg.ddp`` (DDP_* make variables, validated by suite.launch.config)."""


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One measured configuration (what a declared ``Case`` of this experiment runs)."""

    model: str
    """source | mlp"""
    kind: str
    """solo | local | all_reduce | ddp | manual | manual_coalesced | accum | init_broadcast | ddp_init"""
    label: str
    ddp_kwargs: tuple[tuple[str, object], ...] = ()
    hook: str | None = None
    no_sync: bool = False
    bucket_fraction: float | None = None
    """Bucket cap as a fraction of the model's gradient bytes (the cap is set when the model is known)."""

    @property
    def op(self) -> str:
        return {
            "solo": "solo_step",
            "local": "local_step",
            "all_reduce": "all_reduce",
            "ddp": "ddp_step",
            "manual": "manual_allreduce_step",
            "manual_coalesced": "manual_coalesced_step",
            "accum": "ddp_accum_step",
            "init_broadcast": "broadcast",
            "ddp_init": "ddp_init",
        }[self.kind]


NOOP = "noop"
"""The no-op communication hook: DDP without communication (the baseline of the measured overlap)."""


# --- building blocks ------------------------------------------------------------------------------


def build_model(model: str, settings: Settings, seed: int) -> nn.Module:
    if model == "source":
        return training.source_model(seed)
    return training.mlp(training.mlp_spec_for(settings.params), seed)


def _micro_batches(v: Variant, settings: Settings) -> int:
    return settings.accum if v.kind == "accum" else 1


@dataclass
class Step:
    """A prepared step: ``run`` does one optimizer step; ``model`` is what is checked."""

    run: Callable[[], None]
    model: nn.Module
    ddp: DDP | None = None
    samples_per_step: int = 0
    """Samples this rank consumes per optimizer step."""
    keep: list = field(default_factory=list)
    steps: int = 0
    """Optimizer steps taken so far (``call`` counts them; the check compares with as many reference steps)."""


def _rank_batches(rank: int, settings: Settings, n: int, device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Rank ``rank``'s batches (the same on every step). Different data on every rank (seeded by rank), so
    unsynchronised ranks would diverge; the reference draws every rank's from the same seeds."""
    return [
        training.random_batch(
            settings.batch_per_rank,
            training.SOURCE.in_features,
            training.SOURCE.classes,
            seed=10_000 * (rank + 1) + i,
            device=device,
        )
        for i in range(n)
    ]


_HOOKS = {
    "allreduce": "allreduce_hook",
    "fp16_compress": "fp16_compress_hook",
    "bf16_compress": "bf16_compress_hook",
}


def _noop_hook(state, bucket):
    """No communication: the bucket comes back as it went in (each rank keeps its own gradient)."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def _sum_hook(group, bucket):
    """all_reduce without the division by the world size: wrong on purpose (DDP_HOOKS=sum), so that
    the reference check can be seen to fail."""
    return dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future().then(lambda f: f.value()[0])


def _fp16_scaled_hook(group, bucket):
    """fp16 compression whose average comes back 1.01 times too large: wrong on purpose
    (DDP_HOOKS=fp16_scaled), so that a small-factor error can be seen to fail the per-element tolerance."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    return default_hooks.fp16_compress_hook(group, bucket).then(lambda f: f.value().mul_(1.01))


def _bn_skew_hook(state, bucket):
    """The allreduce hook (a correct average) that also moves every BatchNorm running_mean by 2^-10: buffers
    wrong on purpose (DDP_HOOKS=bn_skew), so that the buffer check can be seen to fail while parameters pass."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    group, module = state

    def skew(fut):
        with torch.no_grad():
            for m in module.modules():
                if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)):
                    m.running_mean.add_(2.0**-10)
        return fut.value()

    return default_hooks.allreduce_hook(group, bucket).then(skew)


def _register_hook(ddp: DDP, hook: str, ctx: DistContext, settings: Settings) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if hook == "powerSGD":
        # start_powerSGD_iter=2 (the least DDP allows with error feedback): the first two
        # steps (warm-up) are vanilla all_reduce, the rest compressed.
        state = powerSGD_hook.PowerSGDState(
            process_group=ctx.group, matrix_approximation_rank=settings.powersgd_rank, start_powerSGD_iter=2
        )
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    elif hook == NOOP:
        ddp.register_comm_hook(None, _noop_hook)
    elif hook == "sum":
        ddp.register_comm_hook(ctx.group, _sum_hook)
    elif hook == "fp16_scaled":
        ddp.register_comm_hook(ctx.group, _fp16_scaled_hook)
    elif hook == "bn_skew":
        ddp.register_comm_hook((ctx.group, ddp.module), _bn_skew_hook)
    else:
        ddp.register_comm_hook(ctx.group, getattr(default_hooks, _HOOKS[hook]))


def hook_wire_bytes(model: nn.Module, hook: str | None, settings: Settings) -> int:
    """Bytes per step on the wire for a compressing hook (PowerSGD: low-rank P and Q, an estimate
    following powerSGD_hook._should_compress with min_compression_rate=2)."""
    full = training.grad_bytes(model)
    if hook == "fp16_compress" or hook == "bf16_compress":
        return full // 2
    if hook != "powerSGD":
        return full
    r, total = settings.powersgd_rank, 0
    for p in model.parameters():
        if p.dim() > 1:
            n, m = p.shape[0], p[0].numel()
            total += (n + m) * r if (n + m) * r * 2 < n * m else n * m
        else:
            total += p.numel()
    return total * 4


def _bucket_cap_mb(v: Variant, settings: Settings) -> float:
    """The fraction's cap in DDP's bucket_cap_mb unit (MiB) from the MLP's gradient bytes."""
    return v.bucket_fraction * training.mlp_spec_for(settings.params).n_params * 4 / 2**20


def variant_ddp_kwargs(case: Variant, settings: Settings) -> dict:
    kwargs = dict(case.ddp_kwargs)
    if case.bucket_fraction is not None:
        kwargs["bucket_cap_mb"] = _bucket_cap_mb(case, settings)
    if "broadcast_buffers" in kwargs and "forward_sync_buffers" in inspect.signature(DDP).parameters:
        # torch 2.13 deprecates broadcast_buffers for forward_sync_buffers; the per-step buffer
        # broadcast this case removes is the same (the init sync is measured by the ddp_init case).
        kwargs["forward_sync_buffers"] = kwargs.pop("broadcast_buffers")
    return kwargs


def _accum_step(model: nn.Module, opt, loss_fn, micro, no_sync: Callable | None) -> None:
    """One optimizer step over ``micro`` micro-batches, the loss of each divided by their number;
    ``no_sync`` (DDP's) wraps all but the last backward."""
    opt.zero_grad(set_to_none=False)
    for i, (x, y) in enumerate(micro):
        last = i == len(micro) - 1
        with no_sync() if no_sync is not None and not last else contextlib.nullcontext():
            (loss_fn(model(x), y) / len(micro)).backward()
    opt.step()


def _prepare(case: Variant, ctx: DistContext, settings: Settings) -> Step:
    loss_fn = nn.CrossEntropyLoss()
    model = build_model(case.model, settings, seed=0).to(ctx.device)
    b = settings.batch_per_rank
    if case.kind in ("solo", "local", "manual", "manual_coalesced"):
        opt = torch.optim.SGD(model.parameters(), lr=training.SOURCE.lr)
        ((x, y),) = _rank_batches(ctx.rank, settings, 1, ctx.device)
        if case.kind == "local":
            return Step(run=lambda: training.local_step(model, opt, loss_fn, x, y), model=model, samples_per_step=b)
        if case.kind == "solo":
            # Only rank 0 steps; the others return at once and wait at the next barrier of the timing loop.
            run = (lambda: training.local_step(model, opt, loss_fn, x, y)) if ctx.rank == 0 else (lambda: None)
            return Step(run=run, model=model, samples_per_step=b)
        if case.kind == "manual":
            return Step(
                run=lambda: training.manual_allreduce_step(model, opt, loss_fn, x, y, ctx.group),
                model=model,
                samples_per_step=b,
            )
        buf: list = [None]

        def coalesced():
            opt.zero_grad(set_to_none=False)
            loss_fn(model(x), y).backward()
            buf[0] = training.allreduce_gradients_coalesced(model, ctx.group, buf[0])
            opt.step()

        return Step(run=coalesced, model=model, samples_per_step=b)
    if case.kind == "all_reduce":
        t = torch.ones(sum(p.numel() for p in model.parameters()), dtype=torch.float32, device=ctx.device)
        return Step(run=lambda: dist.all_reduce(t, group=ctx.group), model=model, keep=[t])
    kwargs = variant_ddp_kwargs(case, settings)
    if ctx.device.type == "cuda":
        kwargs["device_ids"] = [ctx.device.index]
    ddp = DDP(model, process_group=ctx.group, **kwargs)
    internals.sample_every_iteration(ddp)  # logger stats for every iteration, not 1 in 100
    if case.hook:
        _register_hook(ddp, case.hook, ctx, settings)
    opt = torch.optim.SGD(ddp.parameters(), lr=training.SOURCE.lr)
    if case.kind == "ddp":
        ((x, y),) = _rank_batches(ctx.rank, settings, 1, ctx.device)
        return Step(run=lambda: training.local_step(ddp, opt, loss_fn, x, y), model=model, ddp=ddp, samples_per_step=b)
    micro = _rank_batches(ctx.rank, settings, settings.accum, ctx.device)
    return Step(
        run=lambda: _accum_step(ddp, opt, loss_fn, micro, ddp.no_sync if case.no_sync else None),
        model=model,
        ddp=ddp,
        samples_per_step=b * settings.accum,
    )


def state_tensors(module: nn.Module) -> list[torch.Tensor]:
    return [*module.parameters(), *module.buffers()]


def cannot_run(case: Variant, ctx: DistContext, settings: Settings) -> str | None:
    """Reasons known before starting (a crash could not be caught and skipped afterwards)."""
    if case.hook == "powerSGD" and ctx.backend == "gloo":
        grad = training.grad_bytes(build_model(case.model, settings, seed=0))
        if grad > internals.FIRST_BUCKET_BYTES:
            # PowerSGD chains all_reduces per bucket in future callbacks; on Gloo the callbacks of
            # different buckets issue them in a different order on each rank, a collective
            # mismatch that aborts the process (gloo "Received data size doesn't match";
            # pytorch/pytorch#58467). A model in one DDP bucket (<= the 1 MiB first bucket) is safe.
            return (
                f"PowerSGD on Gloo needs the model in one DDP bucket; {case.model} has {grad} B of gradients "
                f"(> {internals.FIRST_BUCKET_BYTES} B first bucket): use NCCL, or see the source model's case"
            )
    return None


# --- the single-process reference and the check rule ---------------------------------------------------

U32 = 2.0**-24
"""Unit roundoff of float32."""

_WIRE = {
    "fp16_compress": ("float16", 2.0**-11, 2.0**-24),
    "fp16_scaled": ("float16", 2.0**-11, 2.0**-24),
    "bf16_compress": ("bfloat16", 2.0**-8, 0.0),
}
"""Hooks that compress the gradient on the wire: (dtype, unit roundoff, absolute error of its subnormals)."""


def unchecked_reason(v: Variant) -> str | None:
    if v.kind in ("solo", "local"):
        return (
            "no communication: a single-process step has nothing to compare with but itself "
            "(the synchronised cases are checked against single-process training)"
        )
    if v.hook == NOOP:
        return "no communication by design: each rank keeps its own gradient, so ranks diverge"
    if v.hook == "powerSGD":
        return (
            "PowerSGD is a low-rank approximation with error feedback: its distance from exact averaging "
            "depends on the gradients' spectrum, no tolerance follows from the compression alone"
        )
    return None


def _largest(x):
    """The largest of a tensor of per-element maxima (a plain number stays as it is)."""
    return x.max() if isinstance(x, torch.Tensor) else x


@dataclass(frozen=True)
class CheckRule:
    """How a synchronised case's parameters are compared with the reference's (see the module docstring)."""

    world: int
    wire: str
    """float32 | float16 | bfloat16: what the averaged gradient travels as."""
    u: float
    abs_err: float
    lr: float

    @property
    def exact(self) -> bool:
        return self.wire == "float32" and self.world <= 2

    def step_term(self, g_max, p_max):
        """What one step's reduction and update may move an element by (module docstring)."""
        return self.lr * 2 * self.world * (self.u * g_max + self.abs_err) + 2 * U32 * p_max

    def tol(self, steps: int, g_max, p_max):
        """The bound (module docstring); per element when max|g| and max|p| are tensors of elements: each
        element's own 2 x steps x step term, plus steps x (steps - 1) x the largest element's step term for
        the earlier steps' differences carried into later gradients (none after one step)."""
        if self.exact:
            return 0.0
        largest = self.step_term(_largest(g_max), _largest(p_max))
        return 2 * steps * self.step_term(g_max, p_max) + steps * (steps - 1) * largest

    def describe(self, steps: int, tol: float) -> str:
        if self.exact:
            return "exact"
        why = "float32 sum order" if self.wire == "float32" else f"{self.wire} wire"
        return f"tol per element, up to {tol:.2g} ({why}, {self.world} ranks, {steps} steps)"

    FORMULA = (
        "per element: 2 x S x e(that element) + S x (S - 1) x e(the largest), e = lr x 2N x (u x max|g| + a) + "
        "2 x 2^-24 x max|p|, S steps, max|g| and max|p| the element's largest averaged gradient term and "
        "parameter so far"
    )


def check_rule(v: Variant, world: int) -> CheckRule:
    wire, u, a = _WIRE.get(v.hook or "", ("float32", U32, 0.0))
    return CheckRule(world=world, wire=wire, u=u, abs_err=a, lr=training.SOURCE.lr)


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
        self, model: str, settings: Settings, world: int, device, micro: int, sync_each: bool, sync_buffers: bool
    ):
        self._args = (model, settings, world, device, micro, sync_each, sync_buffers)
        self._checkpoints: dict[int, tuple] = {}
        self._start()
        self._snapshots: dict[int, tuple[torch.Tensor, ...]] = {}

    def _start(self) -> None:
        """A fresh model at step 0."""
        model, settings, world, device, micro, sync_each, sync_buffers = self._args
        self.net = build_model(model, settings, seed=0).to(device)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=training.SOURCE.lr)
        self.loss_fn = nn.CrossEntropyLoss()
        self.batches = [_rank_batches(r, settings, micro, device) for r in range(world)]
        self.world, self.micro, self.sync_each, self.sync_buffers = world, micro, sync_each, sync_buffers
        self.steps = 0
        self.p_max = training.flat_params(self.net).abs()
        self.g_max = torch.zeros_like(self.p_max)
        self.bufs = [[b.detach().clone() for b in self.net.buffers()] for _ in range(world)]
        """Each rank's buffers (BatchNorm running stats and count) as that rank holds them."""

    def _p_max(self) -> torch.Tensor:
        """Per element: the largest |parameter| so far."""
        return torch.maximum(self.p_max, training.flat_params(self.net).abs())

    def _local(self, r: int, x, y) -> list[torch.Tensor]:
        """Rank ``r``'s forward (from and into its own buffers) and backward; its gradients."""
        with torch.no_grad():
            for b, mine in zip(self.net.buffers(), self.bufs[r]):
                b.copy_(mine)
        self.net.zero_grad(set_to_none=False)
        loss = self.loss_fn(self.net(x), y)
        (loss / self.micro if self.micro > 1 else loss).backward()  # as training.local_step / _accum_step
        self.bufs[r] = [b.detach().clone() for b in self.net.buffers()]
        return [p.grad.clone() for p in self.net.parameters()]

    def _broadcast_buffers(self, i: int) -> None:
        """DDP's buffer sync before micro-batch ``i``'s forward: every rank takes rank 0's buffers when
        ``sync_buffers`` and the previous forward synchronised gradients (DDP's require_forward_param_sync:
        every micro-batch with sync_each, only the first under no_sync)."""
        if self.sync_buffers and (i == 0 or self.sync_each):
            self.bufs = [[b.clone() for b in self.bufs[0]] for _ in range(self.world)]

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

    def at(self, steps: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Flat parameters after ``steps`` steps, per element max|g|, max|p| up to then, and every rank's
        flat buffers (float64, one row per rank: ``flat_buffers``) (snapshots are kept)."""
        if steps not in self._snapshots:
            if steps < self.steps:  # this case ran fewer steps than an earlier one (its budget, precision mode)
                self._rewind(steps)
            while self.steps < steps:
                self._step()
            bufs = torch.stack([flat_buffers(bs) for bs in self.bufs])
            self._snapshots[steps] = (
                training.flat_params(self.net).clone(),
                self.g_max.clone(),
                self.p_max.clone(),
                bufs,
            )
        return self._snapshots[steps]


def flat_buffers(buffers) -> torch.Tensor:
    """Buffers (float32 running stats, int64 counts) as one float64 vector: every value exactly."""
    return torch.cat([b.detach().reshape(-1).double() for b in buffers]) if buffers else torch.zeros(0).double()


def syncs_buffers(v: Variant) -> bool:
    """Whether every forward of ``v`` starts from rank 0's buffers: DDP's default (``broadcast_buffers``);
    without it, and in the manual cases (no DDP), each rank's BatchNorm keeps its own running stats."""
    return v.kind in ("ddp", "accum") and dict(v.ddp_kwargs).get("broadcast_buffers", True)


def _reference(session: Session, ctx: DistContext, v: Variant, settings: Settings) -> Reference:
    micro = _micro_batches(v, settings)
    sync_each = v.kind == "accum" and not v.no_sync
    key = (EXPERIMENT, "reference", id(ctx.group), v.model, micro, sync_each, syncs_buffers(v))
    return session.once(
        key, lambda: Reference(v.model, settings, ctx.world_size, ctx.device, micro, sync_each, syncs_buffers(v))
    )


def buffer_rule(v: Variant, rule: CheckRule) -> str:
    """How a rank's buffers are compared with the reference's for that rank (module docstring)."""
    whose = (
        "rank 0's broadcast before each forward that follows a gradient sync, then the rank's own batches"
        if syncs_buffers(v)
        else "the rank's own batches"
    )
    if rule.exact:
        return f"exact ({whose})"
    return (
        f"exact after the one-step check ({whose}; its forwards saw the initial parameters, the same on every "
        "rank and in the reference); not compared after the timed steps (parameters within tol: no bound for "
        "the running stats derived)"
    )


def buffers_compared(rule: CheckRule, steps: int) -> bool:
    """Whether the buffers are compared after ``steps`` optimizer steps: always under the exact rule; under tol
    only after the one-step check, where every forward ran on the initial parameters (bit-identical on every
    rank and in the reference), so the running stats moved by the same batches are too."""
    return rule.exact or steps == 1


def _buffer_check(ctx: DistContext, ref_bufs, module: nn.Module, rule: CheckRule, steps: int, seen: dict) -> int:
    """Wrong elements of this rank's buffers against the reference's for this rank (``buffers_compared``)."""
    mine = flat_buffers(list(module.buffers()))
    if not buffers_compared(rule, steps) or mine.numel() == 0:
        return 0
    if ctx.rank != 0:
        ref_bufs = torch.empty(ctx.world_size, mine.numel(), dtype=mine.dtype, device=mine.device)
    else:
        ref_bufs = ref_bufs.to(mine)
    dist.broadcast(ref_bufs, src=0, group=ctx.group)
    diff = (mine - ref_bufs[ctx.rank]).abs()
    seen.update(buffer_max_abs_diff=diff.max().item())
    return int((~(diff == 0)).sum().item())  # NaN is wrong


def _reference_check(
    v: Variant, step: Step, ctx: DistContext, settings: Settings, session: Session, seen: dict
) -> Callable[[], int]:
    """Wrong elements of this rank's parameters against the reference after ``step.steps`` steps. Rank 0
    trains the reference (shared by every case of the model and kind in this session) and broadcasts it."""
    rule = check_rule(v, ctx.world_size)

    def check() -> int:
        mine = training.flat_params(step.model)
        ref_bufs = None
        if ctx.rank == 0:  # parameters, per element max|g| and max|p|, in one broadcast
            *ref, ref_bufs = _reference(session, ctx, v, settings).at(step.steps)
            ref = torch.cat([t.to(mine) for t in ref])
        else:
            ref = torch.empty(3 * mine.numel(), dtype=mine.dtype, device=mine.device)
        dist.broadcast(ref, src=0, group=ctx.group)
        ref, g_max, p_max = ref.split(mine.numel())
        tol = rule.tol(step.steps, g_max.double(), p_max.double())  # per element (0 where exact)
        diff = (mine - ref).abs()
        worst = float(torch.as_tensor(tol).max().item())
        seen.update(steps=step.steps, tol=worst, max_abs_diff=diff.max().item(), rule=rule.describe(step.steps, worst))
        wrong = int((~(diff.double() <= tol)).sum().item())  # NaN is wrong
        return wrong + _buffer_check(ctx, ref_bufs, step.model, rule, step.steps, seen)

    return check


# --- one buffer set of a case: the step, its check, its outputs -----------------------------------------


def step_buffers(v: Variant, ctx: DistContext, settings: Settings, session: Session) -> Buffers:
    step = _prepare(v, ctx, settings)
    run = step.run

    def counted():
        run()
        step.steps += 1

    step.run = counted
    logger: list[dict] = []  # DDP's logger, read before each timed sample
    seen: dict = {}  # what the last check found (its rule, tolerance, largest difference)
    b = _step_call_and_check(v, step, ctx, settings, session, logger, seen)
    b.derive = lambda m, around, session: _timed_fields(v, settings, step, ctx, m, around, session, logger, seen)
    return b


def _step_call_and_check(
    v: Variant, step: Step, ctx: DistContext, settings: Settings, session: Session, logger: list, seen: dict
) -> Buffers:
    if v.kind == "all_reduce":
        (t,) = step.keep
        n = ctx.world_size
        return Buffers(
            call=lambda a: dist.all_reduce(t, group=ctx.group, async_op=a),
            check=lambda: int((t != n).sum().item()),
            outputs=lambda: (t,),
            reset=lambda: t.fill_(1),
        )
    reset = None
    if step.ddp is not None and v.kind == "ddp":
        # Not an input reset: before each timed sample (outside the timed interval) read DDP's logger,
        # which by then holds the previous step's interval statistics (DDP logs a step at the next forward).
        reset = lambda: logger.append(internals.logging_data(step.ddp))  # noqa: E731
    check = None if unchecked_reason(v) else _reference_check(v, step, ctx, settings, session, seen)
    return Buffers(
        call=lambda a: step.run(),
        check=check,
        reset=reset,
        outputs=lambda: [p.detach() for p in step.model.parameters()],
    )


def init_buffers(v: Variant, ctx: DistContext, settings: Settings) -> Buffers:
    """Initial-state broadcast: rank r starts from seed r; afterwards every rank must hold rank 0's state."""
    reference = torch.cat(
        [t.detach().reshape(-1).float() for t in state_tensors(build_model(v.model, settings, seed=0).to(ctx.device))]
    )
    module = build_model(v.model, settings, seed=ctx.rank).to(ctx.device)

    if v.kind == "init_broadcast":

        def sync(a: bool):
            # What the article describes: broadcast is how rank 0's initial state reaches the others.
            for t in state_tensors(module):
                dist.broadcast(t.detach(), src=0, group=ctx.group)
    else:

        def sync(a: bool):
            kw = {"device_ids": [ctx.device.index]} if ctx.device.type == "cuda" else {}
            DDP(module, process_group=ctx.group, **kw)  # construction broadcasts rank 0's state

    def check() -> int:
        return verify.count_wrong(torch.cat([t.detach().reshape(-1).float() for t in state_tensors(module)]), reference)

    return Buffers(
        call=sync,
        check=check,
        outputs=lambda: [t.detach() for t in state_tensors(module)],
        derive=lambda m, around, session: _peak_fields(ctx, around),
    )


# --- what is derived from the timed steps, and the baselines they are compared with -----------------


def _baseline_s(session: Session, ctx: DistContext, settings: Settings, v: Variant) -> float:
    """Median of a baseline step of ``v.model`` (solo, no communication, no-op hook, all_reduce alone): that
    case's own timed run when it ran before (the usual order), else one blocking baseline run by the harness,
    shared by the run."""

    def make_call():
        step = _prepare(v, ctx, settings)
        return lambda a: step.run()

    return session.baseline(_baseline_key(ctx, v), ctx, make_call).median_s


def _baseline_key(ctx: DistContext, v: Variant) -> tuple:
    return EXPERIMENT, id(ctx.group), v.model, v.kind, v.hook


def _baselines(model: str) -> dict[str, Variant]:
    return {
        "solo": Variant(model=model, kind="solo", label="solo"),
        "local": Variant(model=model, kind="local", label="local"),
        "all_reduce": Variant(model=model, kind="all_reduce", label="all_reduce"),
        "noop": Variant(model=model, kind="ddp", label="noop", hook=NOOP),
    }


def _is_baseline(v: Variant) -> bool:
    return v.kind in ("solo", "local", "all_reduce") or v.hook == NOOP


def _peak_fields(ctx: DistContext, around) -> dict:
    from suite.api import PeakMemory

    if not isinstance(around, PeakMemory):
        return {}
    return {"peak_mem_bytes": int(dist_max(ctx, [float(around.peak_bytes)])[0]), "peak_mem_kind": around.kind}


LOGGER_KEYS = {
    "ddp_logger_forward_ms": "forward_compute_time",
    "ddp_logger_backward_compute_ms": "backward_compute_time",
    "ddp_logger_comm_ms": "backward_comm_time",
    "ddp_logger_overlap_ms": "backward_compute_comm_overlap_time",
}


def _bucket_fields(ddp: DDP) -> dict:
    """The buckets DDP's reducer holds now (after the timed steps: DDP rebuilds them in gradient-ready
    order at the start of its second iteration)."""
    sizes = internals.bucket_sizes(ddp)
    return {
        "n_buckets": None if sizes is None else len(sizes),
        "bucket_sizes": sizes,
        "bucket_cap_bytes": internals.logging_data(ddp).get("bucket_cap_bytes"),
    }


def _logger_fields(ctx: DistContext, step: Step, readings: list[dict], timed_steps: int) -> dict:
    """DDP's interval statistics of the timed steps only: the logger's per-iteration values (iteration k
    logged = step k-1), median over the timed steps this rank logged, max over ranks."""
    first_timed = step.steps - timed_steps
    by_step = {int(d["iteration"]) - 1: d for d in readings if "backward_comm_time" in d}
    timed = [d for k, d in sorted(by_step.items()) if k >= first_timed]
    n = int(dist_min(ctx, [len(timed)])[0])  # the fewest any rank has (same everywhere)
    if n == 0:
        return {"ddp_logger_steps": 0}
    values = [statistics.median(float(d[k]) for d in timed[:n]) / 1e6 for k in LOGGER_KEYS.values()]  # ns -> ms
    out = dict(zip(LOGGER_KEYS, dist_max(ctx, values)))
    comm, ovl = out["ddp_logger_comm_ms"], out["ddp_logger_overlap_ms"]
    out["ddp_logger_overlap_pct"] = 100.0 * ovl / comm if comm > 0 else None
    out["ddp_logger_steps"] = n
    return out


def measured_overlap(v: Variant) -> bool:
    """DDP cases whose communication is the float32 all_reduce of the gradient (the baseline's bytes)."""
    return v.kind == "ddp" and v.hook in (None, "allreduce")


def _timed_fields(
    v: Variant, settings: Settings, step: Step, ctx: DistContext, m, around, session: Session, logger: list, seen: dict
) -> dict:
    """Fields derived from this case's own timed median ``t`` (the formulas are in the provenance)."""
    t, n, bsz = m.median_s, ctx.world_size, settings.batch_per_rank
    if _is_baseline(v):
        session.keep_baseline(_baseline_key(ctx, v), m)
    base = _baselines(v.model)
    fields: dict = {}
    if v.kind != "all_reduce":
        k = step.samples_per_step // bsz
        ranks_stepping = 1 if v.kind == "solo" else n
        solo = _baseline_s(session, ctx, settings, base["solo"])
        fields |= {
            "solo_step_ms": solo * 1e3,
            "micro_batches": k,
            "samples_per_step": step.samples_per_step * ranks_stepping,
            "samples_per_s": step.samples_per_step * ranks_stepping / t,
            "scaling_efficiency": k * solo / t,
        }
        if v.kind != "local" and v.kind != "solo":
            local = _baseline_s(session, ctx, settings, base["local"])
            fields |= {"local_step_ms": local * 1e3, "comm_exposed_ms": (t - k * local) * 1e3}
    if measured_overlap(v):
        noop = _baseline_s(session, ctx, settings, base["noop"])
        ar = _baseline_s(session, ctx, settings, base["all_reduce"])
        fields |= {
            "noop_step_ms": noop * 1e3,
            "allreduce_ms": ar * 1e3,
            "comm_added_ms": (t - noop) * 1e3,
            "overlap_saved_ms": (noop + ar - t) * 1e3,
            "overlap_saved_pct": 100.0 * (noop + ar - t) / ar,
        }
    if step.ddp is not None:
        fields |= _bucket_fields(step.ddp)
        if v.kind == "ddp":
            readings = logger + [internals.logging_data(step.ddp)]
            fields |= _logger_fields(ctx, step, readings, m.iterations)
    if seen:
        worst = dist_max(ctx, [seen["max_abs_diff"]])[0]
        fields |= {
            "check_rule": seen["rule"],
            "check_tol": seen["tol"],
            "check_steps": seen["steps"],
            "check_max_abs_diff": worst,
        }
        if "buffer_max_abs_diff" in seen:
            fields["check_buffer_max_abs_diff"] = dist_max(ctx, [seen["buffer_max_abs_diff"]])[0]
    fields |= _peak_fields(ctx, around)
    return fields
