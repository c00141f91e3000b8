"""DDP: what gradient synchronisation costs in a real training step, and how DDP hides it.

Two models (``suite.training``): the source article's ``nn.Linear(1024, 10)`` and a
communication-heavy MLP whose size is the knob ``DDP_PARAMS`` (default 2M parameters,
8 MB of float32 gradient per step; ``DDP_PARAMS=25M`` for a 100 MB all_reduce per step).
Every case times one optimizer step (zero_grad, forward, CrossEntropyLoss, backward,
synchronisation, SGD step) on a pre-built batch of ``DDP_BATCH`` samples per rank
(default 32, the article's), through ``suite.timing.measure`` in blocking mode: ranks
meet at a barrier, then each sample is one step; the sample is the slowest rank's time.

Cases, in the order they run (one model after the other):

- ``solo_step``: the step on rank 0 alone while the other ranks wait at the barrier:
  the one-rank baseline of scaling efficiency, taken in the same run.
- ``local_step``: every rank steps, no communication (lower bound with N ranks sharing
  the machine; ranks drift apart, so there is no consistency check).
- ``all_reduce``: the gradient all_reduce alone (one coalesced buffer of the gradient
  bytes): the communication cost without compute.
- ``ddp_step``: DistributedDataParallel with defaults, then communication hooks (allreduce,
  fp16 and bf16 compression, PowerSGD rank 1; a hook the backend cannot run is skipped with
  its reason) and, for the MLP, a ``bucket_cap_mb`` sweep (``DDP_BUCKETS_MB``),
  ``gradient_as_bucket_view``, ``static_graph`` and ``broadcast_buffers=False`` (passed as
  ``forward_sync_buffers=False`` where torch has it: 2.13 deprecates the old name).
- ``manual_allreduce_step``: the article's synchronous SGD: backward, then all_reduce of
  every gradient, divided by the world size. ``manual_coalesced_step``: the same with one
  flat buffer and one all_reduce.
- ``ddp_accum_step`` (MLP): gradient accumulation over ``DDP_ACCUM`` micro-batches per optimizer
  step, with ``no_sync`` on all but the last (one all_reduce per step) and without it.
- ``broadcast`` / ``ddp_init``: the initial-state broadcast from rank 0 that DDP does at
  construction: per-tensor ``broadcast`` of parameters and buffers, and the whole DDP
  constructor. Ranks start from different weights; the check is exact equality with rank 0's.

Every case is a declared ``suite.case.Case`` run by the harness (suite/runner.py): one
training step is one ``call``; the harness times it (blocking mode) and checks it.

Recorded besides the step-time percentiles, derived from the case's own timed median t
(``Buffers.derive``; ``provenance`` names each formula): ``samples_per_s`` (global),
``scaling_efficiency`` = k·t(solo) / t (k micro-batches per step; 1 = perfect linear
scaling), ``comm_exposed_ms`` = t − k·t(local_step) (communication the step waits for), with
t(solo), t(local_step) the timed medians of the solo and no-communication cases of the same
model (``solo_step_ms``, ``local_step_ms``; a baseline run by the harness if those cases did
not run); for DDP cases the timed module's own logger (``_get_ddp_logging_data``, every
iteration sampled, averages over its warm-up and timed steps, max over ranks): ``comm_ms``
(avg_backward_comm_time), ``overlap_ms`` (avg_backward_compute_comm_overlap_time) and
``overlap_pct`` = overlap/comm. ``peak_mem_bytes`` is the max over ranks of
``suite.profiling.PeakMemory`` around the warm-up and timed steps (``Case.around``).
``size_bytes`` is the float32 gradient bytes each rank all-reduces per optimizer step, so
busbw (all_reduce factor) is the *effective* gradient bandwidth of the whole step; hooks that
compress report ``wire_bytes`` (fp16: half; PowerSGD: the low-rank factors, an estimate).
Correctness (``n_wrong``): after the check step and after the timed steps every parameter must
be bit-identical to rank 0's (DDP and manual steps); ``solo_step`` / ``local_step`` restore the
initial state before each sample and must equal one step replayed from it on the same rank;
the gradient ``all_reduce`` (of ones, refilled before each sample) must equal the world size;
the init cases must hold rank 0's initial state exactly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from suite import training, verify
from suite.case import Buffers, Bytes, Case, CaseSkipped, Session, experiment_test, support_reason
from suite.config import BenchConfig, DdpSettings
from suite.dist import DistContext

EXPERIMENT = "ddp"


Settings = DdpSettings
"""The experiment's knobs: ``cfg.ddp`` (DDP_* make variables, validated by suite.config)."""


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

    @property
    def op(self) -> str:
        return {"solo": "solo_step", "local": "local_step", "all_reduce": "all_reduce", "ddp": "ddp_step",
                "manual": "manual_allreduce_step", "manual_coalesced": "manual_coalesced_step",
                "accum": "ddp_accum_step", "init_broadcast": "broadcast", "ddp_init": "ddp_init"}[self.kind]


def cases(settings: Settings) -> list[Variant]:
    """Every configuration, identical on all ranks."""
    out: list[Variant] = []
    for model in ("source", "mlp"):
        out += [Variant(model=model, kind="solo", label="solo (1 rank)"),
                Variant(model=model, kind="local", label="no communication"),
                Variant(model=model, kind="all_reduce", label="grad all_reduce only"),
                Variant(model=model, kind="ddp", label="ddp"),
                Variant(model=model, kind="manual", label="manual all_reduce"),
                Variant(model=model, kind="manual_coalesced", label="manual coalesced")]
        out += [Variant(model=model, kind="ddp", label=f"ddp hook {h}", hook=h)
                for h in ("allreduce", "fp16_compress", "bf16_compress", "powerSGD")]
        if model == "mlp":
            out += [Variant(model=model, kind="ddp", label=f"ddp bucket_cap_mb={b:g}",
                            ddp_kwargs=(("bucket_cap_mb", b),)) for b in settings.buckets_mb]
            out += [Variant(model=model, kind="ddp", label="ddp gradient_as_bucket_view",
                            ddp_kwargs=(("gradient_as_bucket_view", True),)),
                    Variant(model=model, kind="ddp", label="ddp static_graph", ddp_kwargs=(("static_graph", True),)),
                    Variant(model=model, kind="ddp", label="ddp broadcast_buffers=False",
                            ddp_kwargs=(("broadcast_buffers", False),))]
            out += [Variant(model=model, kind="accum", label=f"accum x{settings.accum} no_sync", no_sync=True),
                    Variant(model=model, kind="accum", label=f"accum x{settings.accum} sync each")]
        out += [Variant(model=model, kind="init_broadcast", label="init: broadcast per tensor"),
                Variant(model=model, kind="ddp_init", label="init: DDP constructor")]
    return out


def case_id(c: Variant) -> str:
    return f"{c.model}-" + c.label.replace(" ", "_").replace("(", "").replace(")", "").replace(":", "")


# --- building blocks ------------------------------------------------------------------------------

def _build_model(model: str, settings: Settings, seed: int) -> nn.Module:
    if model == "source":
        return training.source_model(seed)
    return training.mlp(training.mlp_spec_for(settings.params), seed)


@dataclass
class Step:
    """A prepared step: ``run`` does one optimizer step; ``model`` is what is checked."""

    run: Callable[[], None]
    model: nn.Module
    ddp: DDP | None = None
    samples_per_step: int = 0
    """Samples this rank consumes per optimizer step."""
    keep: list = field(default_factory=list)


def _batches(ctx: DistContext, settings: Settings, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    # Different data on every rank (seeded by rank), so unsynchronised ranks would diverge.
    return [training.random_batch(settings.batch_per_rank, training.SOURCE.in_features, training.SOURCE.classes,
                                  seed=10_000 * (ctx.rank + 1) + i, device=ctx.device) for i in range(n)]


_HOOKS = {
    "allreduce": "allreduce_hook",
    "fp16_compress": "fp16_compress_hook",
    "bf16_compress": "bf16_compress_hook",
}


def _register_hook(ddp: DDP, hook: str, ctx: DistContext, settings: Settings) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if hook == "powerSGD":
        # start_powerSGD_iter=2 (the least DDP allows with error feedback): the first two
        # steps (warm-up) are vanilla all_reduce, the rest compressed.
        state = powerSGD_hook.PowerSGDState(process_group=ctx.group,
                                            matrix_approximation_rank=settings.powersgd_rank,
                                            start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    else:
        ddp.register_comm_hook(ctx.group, getattr(default_hooks, _HOOKS[hook]))


def _wire_bytes(model: nn.Module, hook: str | None, settings: Settings) -> int:
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


def _ddp_kwargs(case: Variant) -> dict:
    kwargs = dict(case.ddp_kwargs)
    if "broadcast_buffers" in kwargs and "forward_sync_buffers" in inspect.signature(DDP).parameters:
        # torch 2.13 deprecates broadcast_buffers for forward_sync_buffers; the per-step buffer
        # broadcast this case removes is the same (the init sync is measured by the ddp_init case).
        kwargs["forward_sync_buffers"] = kwargs.pop("broadcast_buffers")
    return kwargs


def _prepare(case: Variant, ctx: DistContext, settings: Settings) -> Step:
    loss_fn = nn.CrossEntropyLoss()
    model = _build_model(case.model, settings, seed=0).to(ctx.device)
    b = settings.batch_per_rank
    if case.kind in ("solo", "local", "manual", "manual_coalesced"):
        opt = torch.optim.SGD(model.parameters(), lr=training.SOURCE.lr)
        (x, y), = _batches(ctx, settings, 1)
        if case.kind == "local":
            return Step(run=lambda: training.local_step(model, opt, loss_fn, x, y), model=model, samples_per_step=b)
        if case.kind == "solo":
            # Only rank 0 steps; the others return at once and wait at the next barrier of the timing loop.
            run = (lambda: training.local_step(model, opt, loss_fn, x, y)) if ctx.rank == 0 else (lambda: None)
            return Step(run=run, model=model, samples_per_step=b)
        if case.kind == "manual":
            return Step(run=lambda: training.manual_allreduce_step(model, opt, loss_fn, x, y, ctx.group), model=model,
                        samples_per_step=b)
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
    kwargs = _ddp_kwargs(case)
    if ctx.device.type == "cuda":
        kwargs["device_ids"] = [ctx.device.index]
    ddp = DDP(model, process_group=ctx.group, **kwargs)
    ddp._set_ddp_runtime_logging_sample_rate(1)  # logger stats for every iteration, not 1 in 100
    if case.hook:
        _register_hook(ddp, case.hook, ctx, settings)
    opt = torch.optim.SGD(ddp.parameters(), lr=training.SOURCE.lr)
    if case.kind == "ddp":
        (x, y), = _batches(ctx, settings, 1)
        return Step(run=lambda: training.local_step(ddp, opt, loss_fn, x, y), model=model, ddp=ddp, samples_per_step=b)
    # gradient accumulation: k micro-batches per optimizer step
    micro = _batches(ctx, settings, settings.accum)

    def accum():
        opt.zero_grad(set_to_none=False)
        for i, (x, y) in enumerate(micro):
            last = i == len(micro) - 1
            with (ddp.no_sync() if case.no_sync and not last else contextlib.nullcontext()):
                (loss_fn(ddp(x), y) / len(micro)).backward()
        opt.step()
    return Step(run=accum, model=model, ddp=ddp, samples_per_step=b * settings.accum)


def _max_over_ranks(ctx: DistContext, values: list[float]) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctx.group)
    return t.cpu().tolist()


def _state(module: nn.Module) -> list[torch.Tensor]:
    return [*module.parameters(), *module.buffers()]


def _params_differ_from_rank0(ctx: DistContext, model: nn.Module) -> int:
    """Elements of this rank's parameters that differ from rank 0's (this rank's count; the harness sums)."""
    mine = training.flat_params(model).contiguous()
    ref = mine.clone()
    dist.broadcast(ref, src=0, group=ctx.group)
    return verify.count_wrong(mine, ref)


def _ddp_logger_ms(ctx: DistContext, ddp: DDP | None) -> dict:
    if ddp is None:
        return {}
    d = ddp._get_ddp_logging_data()
    keys = ("avg_forward_compute_time", "avg_backward_compute_time", "avg_backward_comm_time",
            "avg_backward_compute_comm_overlap_time")
    # every rank holds the keys or none does (same DDP config), so the collective always matches
    fwd, bwd, comm, ovl = _max_over_ranks(ctx, [float(d.get(k, 0)) / 1e6 for k in keys])  # ns -> ms
    return {"forward_ms": fwd, "backward_compute_ms": bwd, "comm_ms": comm, "overlap_ms": ovl,
            "overlap_pct": 100.0 * ovl / comm if comm > 0 else None, "comm_source": "ddp_logging_data",
            "bucket_sizes": d.get("bucket_sizes"), "comm_hook": d.get("comm_hook") or None}


def _cannot_run(case: Variant, ctx: DistContext, settings: Settings) -> str | None:
    """Reasons known before starting (a crash could not be caught and skipped afterwards)."""
    if case.hook == "powerSGD" and ctx.backend == "gloo":
        grad = training.grad_bytes(_build_model(case.model, settings, seed=0))
        if grad > dist._DEFAULT_FIRST_BUCKET_BYTES:
            # PowerSGD chains all_reduces per bucket in future callbacks; on Gloo the callbacks of
            # different buckets issue them in a different order on each rank, a collective
            # mismatch that aborts the process (gloo "Received data size doesn't match";
            # pytorch/pytorch#58467). A model in one DDP bucket (<= the 1 MiB first bucket) is safe.
            return (f"PowerSGD on Gloo needs the model in one DDP bucket; {case.model} has {grad} B of gradients "
                    f"(> {dist._DEFAULT_FIRST_BUCKET_BYTES} B first bucket): use NCCL, or see the source model's case")
    return None


# --- one buffer set of a case: the step, its check, its outputs -----------------------------------------

def _step_buffers(v: Variant, ctx: DistContext, settings: Settings) -> Buffers:
    step = _prepare(v, ctx, settings)
    b = _step_call_and_check(v, step, ctx)
    b.derive = lambda m, around, session: _timed_fields(v, settings, step, ctx, m, around, session)
    return b


def _step_call_and_check(v: Variant, step, ctx: DistContext) -> Buffers:
    if v.kind == "all_reduce":
        t, = step.keep
        n = ctx.world_size
        return Buffers(call=lambda a: dist.all_reduce(t, group=ctx.group, async_op=a),
                       check=lambda: int((t != n).sum().item()), outputs=lambda: (t,), reset=lambda: t.fill_(1))
    if v.kind in ("solo", "local"):
        # Ranks step without communication, so they drift apart: each sample starts from the initial
        # state (reset) and the check replays one step from it on this rank (solo: off rank 0, no step).
        initial = [s.detach().clone() for s in _state(step.model)]

        def reset():
            with torch.no_grad():
                for s, s0 in zip(_state(step.model), initial):
                    s.copy_(s0)
        step.run()
        expected = training.flat_params(step.model).clone()
        reset()
        return Buffers(call=lambda a: step.run(), check=lambda: verify.count_wrong(training.flat_params(step.model),
                                                                                   expected),
                       outputs=lambda: [p.detach() for p in step.model.parameters()], reset=reset)
    # Rank 0 holds the reference: only the other ranks' parameters are outputs (a flip on every rank
    # alike would leave them identical to rank 0's).
    return Buffers(call=lambda a: step.run(), check=lambda: _params_differ_from_rank0(ctx, step.model),
                   outputs=lambda: [p.detach() for p in step.model.parameters()] if ctx.rank != 0 else [])


def _init_buffers(v: Variant, ctx: DistContext, settings: Settings) -> Buffers:
    """Initial-state broadcast: rank r starts from seed r; afterwards every rank must hold rank 0's state."""
    reference = torch.cat([t.detach().reshape(-1).float() for t in
                           _state(_build_model(v.model, settings, seed=0).to(ctx.device))])
    module = _build_model(v.model, settings, seed=ctx.rank).to(ctx.device)

    if v.kind == "init_broadcast":
        def sync(a: bool):
            # What the article describes: broadcast is how rank 0's initial state reaches the others.
            for t in _state(module):
                dist.broadcast(t.detach(), src=0, group=ctx.group)
    else:
        def sync(a: bool):
            kw = {"device_ids": [ctx.device.index]} if ctx.device.type == "cuda" else {}
            DDP(module, process_group=ctx.group, **kw)  # construction broadcasts rank 0's state

    def check() -> int:
        return verify.count_wrong(torch.cat([t.detach().reshape(-1).float() for t in _state(module)]), reference)
    return Buffers(call=sync, check=check, outputs=lambda: [t.detach() for t in _state(module)],
                   derive=lambda m, around, session: _peak_fields(ctx, around))


# --- what is derived from the timed steps, and the baselines they are compared with -----------------

def _baseline_s(session: Session, ctx: DistContext, settings: Settings, model: str, kind: str) -> float:
    """Median of the solo / no-communication step of ``model``: that case's own timed run when it ran
    before (the usual order), else one blocking baseline run by the harness, shared by the run."""
    def make_call():
        step = _prepare(Variant(model=model, kind=kind, label=kind), ctx, settings)
        return lambda a: step.run()
    return session.baseline((EXPERIMENT, id(ctx.group), model, kind), ctx, make_call).median_s


def _peak_fields(ctx: DistContext, around) -> dict:
    from suite.profiling import PeakMemory

    if not isinstance(around, PeakMemory):
        return {}
    return {"peak_mem_bytes": int(_max_over_ranks(ctx, [float(around.peak_bytes)])[0]), "peak_mem_kind": around.kind}


def _timed_fields(v: Variant, settings: Settings, step, ctx: DistContext, m, around, session: Session) -> dict:
    """Fields derived from this case's own timed median ``t`` (the formulas are in the provenance)."""
    t, n, b = m.median_s, ctx.world_size, settings.batch_per_rank
    if v.kind in ("solo", "local"):
        session.keep_baseline((EXPERIMENT, id(ctx.group), v.model, v.kind), m)
    fields: dict = {}
    if v.kind != "all_reduce":
        k = step.samples_per_step // b
        ranks_stepping = 1 if v.kind == "solo" else n
        solo = _baseline_s(session, ctx, settings, v.model, "solo")
        fields |= {"solo_step_ms": solo * 1e3, "micro_batches": k,
                   "samples_per_step": step.samples_per_step * ranks_stepping,
                   "samples_per_s": step.samples_per_step * ranks_stepping / t, "scaling_efficiency": k * solo / t}
        if v.kind != "local" and v.kind != "solo":
            local = _baseline_s(session, ctx, settings, v.model, "local")
            fields |= {"local_step_ms": local * 1e3, "comm_exposed_ms": (t - k * local) * 1e3}
    else:
        fields |= {"comm_ms": t * 1e3, "comm_source": "timed all_reduce of the gradient bytes"}
    fields |= _ddp_logger_ms(ctx, step.ddp)  # the timed module's own logger: warm-up and timed steps
    fields |= _peak_fields(ctx, around)
    return fields


_PROV_STEP = {
    "solo_step_ms": "measured: the solo case's own timed median (or one blocking baseline run if it did not run)",
    "local_step_ms": "measured: the no-communication case's own timed median (or one blocking baseline run)",
    "samples_per_s": "derived: samples_per_step / time_us",
    "scaling_efficiency": "derived: micro_batches x solo_step_ms / time_us",
    "comm_exposed_ms": "derived: time_us - micro_batches x local_step_ms",
    "peak_mem_bytes": "measured: suite.profiling.PeakMemory around warm-up and the timed steps, max over ranks",
    "forward_ms": "measured: DDP logger (_get_ddp_logging_data) average over the timed module's steps, max over ranks",
    "backward_compute_ms": "measured: DDP logger average over the timed module's steps, max over ranks",
    "overlap_ms": "measured: DDP logger average over the timed module's steps, max over ranks",
    "overlap_pct": "derived: 100 x overlap_ms / comm_ms",
}


def _resolve_step(v: Variant, settings: Settings, case: Case, ctx: DistContext, cfg: BenchConfig,
                  session: Session) -> Case:
    reason = support_reason(ctx, lambda: _step_buffers(v, ctx, settings), v.label)
    if reason:  # e.g. the bf16 hook on Gloo/CPU; the backend's words become the skip reason
        raise CaseSkipped(reason)
    checked = v.kind in ("ddp", "manual", "manual_coalesced", "accum")
    comm = v.kind not in ("solo", "local")
    model = _build_model(v.model, settings, seed=0)
    grad = training.grad_bytes(model)
    fields: dict = {"table": v.model, "n_params": sum(p.numel() for p in model.parameters()),
                    "batch_per_rank": settings.batch_per_rank,
                    "check": "params identical to rank 0" if checked else
                    "all_reduce of ones equals world_size" if v.kind == "all_reduce" else
                    "params equal one step replayed from the initial state on the same rank"}
    prov = dict(_PROV_STEP)
    prov["comm_ms"] = "measured: time_us of the all_reduce alone" if v.kind == "all_reduce" else \
        "measured: DDP logger average backward comm time over the timed module's steps, max over ranks"
    fields.update(_ddp_kwargs(v))
    if v.hook:
        fields["hook"] = v.hook
        fields["wire_bytes"] = _wire_bytes(model, v.hook, settings)
        prov["wire_bytes"] = "modelled: fp16/bf16 half the gradient bytes; PowerSGD low-rank P and Q factors"
    if v.kind == "accum":
        fields["accum_steps"] = settings.accum
        fields["no_sync"] = v.no_sync
    return dataclasses.replace(
        case, fields=fields, provenance=prov,
        bytes=Bytes(size_bytes=grad if comm else 0, count=grad // 4 if comm else 0, dtype="float32",
                    bw_op="all_reduce" if comm else None,
                    definition="float32 gradient bytes each rank all-reduces per optimizer step" if comm else
                    "none: no communication"))


def _resolve_init(v: Variant, settings: Settings, case: Case, ctx: DistContext, cfg: BenchConfig,
                  session: Session) -> Case:
    module = _build_model(v.model, settings, seed=0)
    size, count = training.state_bytes(module), sum(t.numel() for t in _state(module))
    return dataclasses.replace(
        case,
        fields={"table": f"{v.model}-init", "n_tensors": len(_state(module)),
                "check": "state identical to rank 0's after one sync"},
        provenance={"peak_mem_bytes": _PROV_STEP["peak_mem_bytes"]},
        bytes=Bytes(size_bytes=size, count=count, dtype="float32", bw_op="broadcast",
                    definition="float32 bytes of every parameter and buffer rank 0 broadcasts"))


def _peak_memory(ctx: DistContext):
    from suite.profiling import PeakMemory

    return PeakMemory(ctx.device)


def _declare(v: Variant, settings: Settings) -> Case:
    init = v.kind in ("init_broadcast", "ddp_init")
    build = (lambda ctx: _init_buffers(v, ctx, settings)) if init else (lambda ctx: _step_buffers(v, ctx, settings))
    resolved = _resolve_init if init else _resolve_step
    # The test id is case_id(v) (unique over both models); the tables show the recorded label v.label.
    return Case(experiment=EXPERIMENT, op=v.op, label=case_id(v), record_label=v.label,
                identity={"variant": case_id(v), "model": v.model, "in_place": True},
                # the sizes are the model's, known once it is built (resolve)
                bytes=Bytes(size_bytes=0, count=0, dtype="float32", bw_op=None), build=build, mode="blocking",
                around=_peak_memory, names=(v.label,),
                skip=None if init else (lambda ctx, cfg: _cannot_run(v, ctx, settings)),
                resolve=lambda case, ctx, cfg, session: resolved(v, settings, case, ctx, cfg, session))


def ddp_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Every DDP case (the knobs: DDP_PARAMS, DDP_BATCH, DDP_BUCKETS_MB, DDP_ACCUM, DDP_POWERSGD_RANK)."""
    return [_declare(v, cfg.ddp) for v in cases(cfg.ddp)]


test_ddp = experiment_test(ddp_cases)
