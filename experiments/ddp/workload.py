"""What each ddp case runs on one rank: the variants' models, batches and communication hooks, the DDP,
manual and accumulation steps, and their buffer sets. The declarations are in cases.py, the single-process
reference and its check rule in check.py, the numbers derived from the timed steps (baselines, overlap, DDP's
logger, buckets) in derived.py."""

from __future__ import annotations

import contextlib
import inspect
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
    record_of,
    restorer,
    verify,
    watch,
)

from . import internals
from . import models as training
from .kinds import Kind
from .settings import DdpSettings

EXPERIMENT = "ddp"


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One measured configuration (what a declared ``Case`` of this experiment runs)."""

    model: str
    """source | mlp"""
    kind: Kind
    """What the case runs (experiments/ddp/kinds.py)."""
    label: str
    ddp_kwargs: tuple[tuple[str, object], ...] = ()
    hook: str | None = None
    no_sync: bool = False
    bucket_fraction: float | None = None
    """Bucket cap as a fraction of the model's gradient bytes (the cap is set when the model is known)."""

    @property
    def op(self) -> str:
        return self.kind.op


NOOP = "noop"
"""The no-op communication hook: DDP without communication (the baseline of the measured overlap)."""


# --- building blocks ------------------------------------------------------------------------------


def build_model(model: str, settings: DdpSettings, seed: int) -> nn.Module:
    if model == "source":
        return training.source_model(seed)
    return training.mlp(training.mlp_spec_for(settings.params), seed)


def micro_batches(v: Variant, settings: DdpSettings) -> int:
    return settings.accum if v.kind.accumulates else 1


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
    seed: int = 0
    """The model's initial weights (every rank's): the harness's seed of the check run, 0 for the timed steps
    (``prepare``)."""


def rank_batches(rank: int, settings: DdpSettings, n: int, device) -> list[tuple[torch.Tensor, torch.Tensor]]:
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


def _register_hook(ddp: DDP, hook: str, ctx: DistContext, settings: DdpSettings) -> None:
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


def hook_wire_bytes(model: nn.Module, hook: str | None, settings: DdpSettings) -> int:
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


def _bucket_cap_mb(v: Variant, settings: DdpSettings) -> float:
    """The fraction's cap in DDP's bucket_cap_mb unit (MiB) from the MLP's gradient bytes."""
    return v.bucket_fraction * training.mlp_spec_for(settings.params).n_params * 4 / 2**20


def variant_ddp_kwargs(case: Variant, settings: DdpSettings) -> dict:
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


def prepare(case: Variant, ctx: DistContext, settings: DdpSettings) -> Step:
    """The step of ``case``: for its check run every rank's model is built from the harness's seed of that check
    repetition (``ctx.seed``: new each time), so that a result left from an earlier step (another case's, with the
    same model) is wrong there; the timed steps start from seed 0, whose reference every case of the model shares
    (a reference of their own would train as many steps again per case; after them the parameters are those of
    that many steps, which a result left from the one-step check run is not)."""
    seed = ctx.seed if ctx.check_run else 0
    step = _prepare(case, ctx, settings, seed)
    step.seed = seed
    return step


def _prepare(case: Variant, ctx: DistContext, settings: DdpSettings, seed: int) -> Step:
    loss_fn = nn.CrossEntropyLoss()
    model = build_model(case.model, settings, seed=seed).to(ctx.device)
    b = settings.batch_per_rank
    kind = case.kind
    if not kind.ddp_wrapped and kind.trains:
        opt = torch.optim.SGD(model.parameters(), lr=training.SOURCE.lr)
        ((x, y),) = rank_batches(ctx.rank, settings, 1, ctx.device)
        if not kind.communicates:
            # steps_ranks 1: only rank 0 steps; the others return at once and wait at the next barrier of the
            # timing loop.
            steps = kind.steps_ranks is None or ctx.rank < kind.steps_ranks
            run = (lambda: training.local_step(model, opt, loss_fn, x, y)) if steps else (lambda: None)
            return Step(run=run, model=model, samples_per_step=b)
        if not kind.coalesced:
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
    if not kind.trains:  # the gradient all_reduce alone: the exact pattern of this rank and seed, in guard bands
        n = sum(p.numel() for p in model.parameters())
        t = verify.guarded(grad_pattern(ctx, n, ctx.rank))
        return Step(run=lambda: dist.all_reduce(t, group=ctx.group), model=model, keep=[t])
    kwargs = variant_ddp_kwargs(case, settings)
    if ctx.device.type == "cuda":
        kwargs["device_ids"] = [ctx.device.index]
    ddp = DDP(model, process_group=ctx.group, **kwargs)
    internals.sample_every_iteration(ddp)  # logger stats for every iteration, not 1 in 100
    if case.hook:
        _register_hook(ddp, case.hook, ctx, settings)
    opt = torch.optim.SGD(ddp.parameters(), lr=training.SOURCE.lr)
    if not kind.accumulates:
        ((x, y),) = rank_batches(ctx.rank, settings, 1, ctx.device)
        return Step(run=lambda: training.local_step(ddp, opt, loss_fn, x, y), model=model, ddp=ddp, samples_per_step=b)
    micro = rank_batches(ctx.rank, settings, settings.accum, ctx.device)
    return Step(
        run=lambda: _accum_step(ddp, opt, loss_fn, micro, ddp.no_sync if case.no_sync else None),
        model=model,
        ddp=ddp,
        samples_per_step=b * settings.accum,
    )


def grad_pattern(ctx: DistContext, n: int, rank: int | None = None) -> torch.Tensor:
    """The gradient all_reduce's data: rank ``rank``'s exact pattern (verify.pattern) of ``n`` float32 elements for
    this check repetition's seed, or (``rank`` None) the exact sum of every rank's."""
    if rank is None:
        return verify.reduce_expected("sum", ctx.world_size, n, torch.float32, device=ctx.device, seed=ctx.seed)
    return verify.pattern(
        rank, n, torch.float32, redop="sum", world_size=ctx.world_size, device=ctx.device, seed=ctx.seed
    )


def flat_grads(model: nn.Module) -> torch.Tensor:
    """Every parameter's gradient (what the last step averaged), flat, in parameter order; zeros where none."""
    return torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).detach().reshape(-1) for p in model.parameters()]
    )


def step_outputs(model: nn.Module) -> list[torch.Tensor]:
    """A step's outputs: its parameters (what is checked), then its flat gradient (a copy: what the harness compares
    with the check run's to name a stale one)."""
    return [*(p.detach() for p in model.parameters()), flat_grads(model)]


def state_tensors(module: nn.Module) -> list[torch.Tensor]:
    return [*module.parameters(), *module.buffers()]


def cannot_run(case: Variant, ctx: DistContext, settings: DdpSettings) -> str | None:
    """Reasons known before starting (a crash could not be caught and skipped afterwards)."""
    why = record_of(ctx.backend).cannot.get("powersgd_buckets")
    if case.hook == "powerSGD" and why is not None:
        grad = training.grad_bytes(build_model(case.model, settings, seed=0))
        if grad > internals.FIRST_BUCKET_BYTES:
            # PowerSGD chains all_reduces per bucket in future callbacks; on Gloo the callbacks of
            # different buckets issue them in a different order on each rank, a collective
            # mismatch that aborts the process (gloo "Received data size doesn't match";
            # pytorch/pytorch#58467). A model in one DDP bucket (<= the 1 MiB first bucket) is safe.
            return (
                f"{why}; {case.model} has {grad} B of gradients "
                f"(> {internals.FIRST_BUCKET_BYTES} B first bucket): use NCCL, or see the source model's case"
            )
    return None


# --- one buffer set of a case: the step, its check, its outputs -----------------------------------------


def step_buffers(
    v: Variant,
    ctx: DistContext,
    settings: DdpSettings,
    session: Session,
    check_of: Callable | None = None,
    derive_of: Callable | None = None,
) -> Buffers:
    """A step case's buffers; ``check_of(step, seen)``: its check (compare.step_check), None if unchecked;
    ``derive_of``: the numbers derived from its timed steps (derived.timed_fields), None: none."""
    step = prepare(v, ctx, settings)
    run = step.run

    def counted():
        run()
        step.steps += 1

    step.run = counted
    logger: list[dict] = []  # DDP's logger, read before each timed sample
    seen: dict = {}  # what the last check found (its rule, tolerance, largest difference)
    b = _step_call_and_check(v, step, ctx, logger, seen, check_of)
    if derive_of is not None:
        b.derive = lambda m, around, session: derive_of(v, settings, step, ctx, m, around, session, logger, seen)
    if v.kind.trains and v.kind.communicates and not ctx.check_run:  # the online fail-slow watch (suite/watch/)
        watch.attach(b, ctx, session, step.model)
    return b


def _step_call_and_check(
    v: Variant, step: Step, ctx: DistContext, logger: list, seen: dict, check_of: Callable | None
) -> Buffers:
    if not v.kind.trains:  # the gradient all_reduce alone
        (t,) = step.keep
        expected = grad_pattern(ctx, t.numel())
        return Buffers(
            call=lambda a: dist.all_reduce(t, group=ctx.group, async_op=a),
            check=lambda: verify.count_wrong(t, expected),
            outputs=lambda: (t,),
            reset=restorer(t),
        )
    read_logger = None
    if step.ddp is not None and v.kind.ddp_step:
        # Before each timed sample (outside the timed interval) read DDP's logger, which by then holds the
        # previous step's interval statistics (DDP logs a step at the next forward).
        read_logger = lambda: logger.append(internals.logging_data(step.ddp))  # noqa: E731
    return Buffers(
        call=lambda a: step.run(),
        check=None if check_of is None else check_of(step, seen),
        before_sample=read_logger,
        outputs=lambda: step_outputs(step.model),
    )


def peak_fields(ctx: DistContext, around) -> dict:
    from suite.api import PeakMemory

    if not isinstance(around, PeakMemory):
        return {}
    return {"peak_mem_bytes": int(dist_max(ctx, [float(around.peak_bytes)])[0]), "peak_mem_kind": around.kind}
