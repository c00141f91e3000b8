"""DDP: what gradient synchronisation costs in a real training step, and how DDP hides it.

Two models (``experiments/ddp/models.py``): the source article's ``nn.Linear(1024, 10)`` and a
communication-heavy MLP whose size is the knob ``DDP_PARAMS`` (default 2M parameters,
8 MB of float32 gradient per step; ``DDP_PARAMS=25M`` for a 100 MB all_reduce per step).
Every case times one optimizer step (zero_grad, forward, CrossEntropyLoss, backward,
synchronisation, SGD step) on a pre-built batch of ``DDP_BATCH`` samples per rank
(default 32, the article's), through ``suite.harness.timing.measure`` in blocking mode: ranks
meet at a barrier, then each sample is one step; the sample is the slowest rank's time.

Cases, in the order they run (one model after the other):

- ``solo_step``: the step on rank 0 alone while the other ranks wait at the barrier:
  the one-rank baseline of scaling efficiency, taken in the same run.
- ``local_step``: every rank steps, no communication (lower bound with N ranks sharing
  the machine).
- ``all_reduce``: the gradient all_reduce alone (one coalesced buffer of the gradient
  bytes): the communication cost without compute; checked exactly (each rank's exact pattern,
  suite/harness/verify.py, against their sum).
- ``ddp_step`` with a no-op communication hook: DDP's whole machinery (buckets, autograd
  hooks, copies) without any communication: the compute side of the measured overlap.
- ``ddp_step``: DistributedDataParallel with defaults, then communication hooks (``DDP_HOOKS``:
  allreduce, fp16 and bf16 compression, PowerSGD rank 1; a hook the backend cannot run is
  skipped with its reason) and, for the MLP, a bucket sweep with caps relative to the
  gradient bytes (``DDP_BUCKET_FRACTIONS``, default 1/8, 1/2, 1 and 2 of them, plus absolute
  ``DDP_BUCKETS_MB``), ``gradient_as_bucket_view``, ``static_graph`` and
  ``broadcast_buffers=False`` (passed as ``forward_sync_buffers=False`` where torch has it:
  2.13 deprecates the old name).
- ``manual_allreduce_step``: the article's synchronous SGD: backward, then all_reduce of
  every gradient, divided by the world size. ``manual_coalesced_step``: the same with one
  flat buffer and one all_reduce.
- ``ddp_accum_step`` (MLP): gradient accumulation over ``DDP_ACCUM`` micro-batches per optimizer
  step, with ``no_sync`` on all but the last (one all_reduce per step) and without it (one
  all_reduce per micro-batch).
- ``broadcast`` / ``ddp_init``: the initial-state broadcast from rank 0 that DDP does at
  construction: per-tensor ``broadcast`` of parameters and buffers, and the whole DDP
  constructor. Ranks start from different weights; the check is exact equality with rank 0's.

Every case is a declared ``suite.case.Case`` run by the harness (suite/harness/runner.py): one
training step is one ``call``; the harness times it (blocking mode) and checks it.

Correctness (``n_wrong``) of every synchronised case (DDP with every option and hook but the
no-op and PowerSGD, manual, coalesced, both accumulations, both models): after the check
step and after the timed steps, every rank's parameters are compared with a single-process
reference (``Reference``) that trains a fresh model (from the same initial weights: for the check
step the harness's seed of that check run, new each time, so that a result left from another case is
wrong; for the timed steps seed 0, whose reference every case of the model shares, and after which
the parameters are those of that many steps) the same number of steps on the same global batches: each
rank's batch (micro-batches) through the same forward/backward, the ranks' gradients averaged in
rank order (sum of g_r x 1/N; with accumulation exactly where DDP averages), then the same SGD step.
Rule (``check_rule`` in the record):

- ``exact`` for 1 or 2 ranks and a float32 wire: the all_reduce of two terms does not depend
  on their order (a + b = b + a) and the division by 2 is exact, so a correct DDP equals the
  reference bit for bit; a hook that sums instead of averaging fails on every element.
- otherwise ``tol``, per parameter element, = 2 x S x e(that element) + S x (S - 1) x e(the largest
  element), e = lr x 2N x (u x max|g| + a) + 2 x 2^-24 x max|p|, after S steps. Per step the average of
  N terms summed in another order (float32, u = 2^-24) or compressed on the wire (fp16: u = 2^-11,
  a = 2^-24 for its subnormals; bf16: u = 2^-8) moves an element of the averaged gradient by at most
  2N(u max|g| + a), the SGD update by lr times that, and the float32 rounding of the update by one ulp
  of the parameter (x2 for safety). From the second step on, every earlier difference also moves the
  next gradients, of every element (the layers are coupled): an element whose own gradients are small
  then differs by what its neighbours' differences carry, hence the second term, which grows with
  S x (S - 1) from the largest element's step term (zero at the one-step check). Measured with the
  default MLP (2M parameters, 4 ranks, Gloo): after 25 steps the largest difference was 3% of that
  allowance, after 105 steps 0.4%; without it (the own-element term alone) 7,201 to 121,428 correct
  elements failed after 25 steps (tests/e2e/test_ddp_tolerance_scale.py). max|g| (that element's
  largest gradient term averaged so far) and max|p| (that element's largest value) are the
  reference's. The one-step check after the check step is where the bound is tightest: there one
  bound for all elements, from the largest of them, let an fp16 average 1.01 times too large through
  at 4 ranks, and the per-element bound fails it.

Buffers (the MLP's BatchNorm1d running mean, variance and count; ``check_buffers`` in the record): the
reference keeps every rank's buffers as that rank holds them. In training mode BatchNorm normalises with
the batch's own statistics, so buffers never change the parameters; each forward moves the running stats
from the buffers it starts with by that rank's batch. With ``broadcast_buffers`` (DDP's default) a forward
starts from rank 0's buffers (DDP broadcasts them before it, when the previous forward synchronised
gradients: every micro-batch, or only the first of a step under ``no_sync``), so after a step rank r holds
rank 0's previous buffers moved by rank r's batch; with ``broadcast_buffers=False``, and in the manual
cases (no DDP), each rank's running stats evolve from its own batches alone (local BatchNorm). Rule:
``exact`` wherever the parameters' rule is (the forward then sees bit-identical parameters and batches, and
the update is the same operation), compared element by element after every check, wrong buffer elements
added to ``n_wrong``. Under the tolerance rule (3 ranks and more) they are compared exactly after the one-step
check: every forward of that step ran on the initial parameters, bit-identical on every rank and in the
reference, so the running stats are too; after the timed steps within a bound per element that the
parameters' tolerance gives them (experiments/ddp/buffer_bound.py: the BatchNorm follows the first Linear,
so its batch statistics move with that Linear's parameters; ``check_buffer_tol``), the batch count exactly.
``DDP_HOOKS=bn_skew`` averages correctly but moves running_mean by 2^-10: the buffers alone fail, at any
world size, after the timed steps too.

Not checked (``checked: false`` with the reason): ``solo_step`` and ``local_step`` (no
communication: nothing but the step compared with itself), the no-op hook (no
communication by design, ranks diverge) and PowerSGD (a low-rank approximation with error
feedback: no tolerance follows from the compression alone).

Recorded besides the step-time percentiles, derived from the case's own timed median t
(``Buffers.derive``; ``provenance`` names each formula): ``samples_per_s`` (global),
``scaling_efficiency`` = k·t(solo) / t (k micro-batches per step; 1 = perfect linear
scaling), ``comm_exposed_ms`` = t − k·t(local_step) (communication the step waits for), with
t(solo), t(local_step) the timed medians of the solo and no-communication cases of the same
model. Measured overlap (DDP cases with an uncompressed float32 all_reduce): with t(noop) the
no-op-hook step and t(ar) the gradient all_reduce alone, ``comm_added_ms`` = t − t(noop) (what
communication adds to DDP's step), ``overlap_saved_ms`` = t(noop) + t(ar) − t (what running
them one after the other would have cost more) and ``overlap_saved_pct`` = 100 x saved / t(ar).
DDP's own logger (``_get_ddp_logging_data``, every iteration sampled) gives its interval
statistics, median over the timed steps (warm-up excluded; DDP logs a step at the next
forward, so the last timed step is not in it), max over ranks: ``ddp_logger_comm_ms``
(first bucket ready to the end of the last bucket's all_reduce), ``ddp_logger_overlap_ms``
(the part of it before backward compute ended), ``ddp_logger_overlap_pct``. ``n_buckets`` and
``bucket_sizes`` are the buckets DDP's reducer holds after the timed steps (rebuilt after its first
iteration).
``peak_mem_bytes`` is the max over ranks of ``suite.harness.profiling.PeakMemory`` around the warm-up
and timed steps (``Case.around``).
``size_bytes`` is the float32 gradient bytes each rank all-reduces per optimizer step, every
all_reduce counted (``sync each`` accumulation: accum x the gradient; ``allreduces_per_step``
says how many), so ``effective_busbw_gbps`` (all_reduce factor over the whole step's time, compute
included; ``busbw_gbps`` is null, as for every record whose time includes compute) is the effective
gradient bandwidth of the whole step; hooks that compress report ``wire_bytes`` (fp16: half;
PowerSGD: the low-rank factors, an estimate).
"""

from __future__ import annotations

import dataclasses

from suite.api import (
    BenchConfig,
    Bytes,
    Case,
    CaseSkipped,
    DistContext,
    Session,
    Timing,
    experiment_test,
    support_reason,
)

from . import derived, kinds
from . import models as training
from .buffer_bound import bn_after_linear
from .init_state import init_buffers
from .check import buffer_rule, check_rule, unchecked_reason
from .compare import step_check
from .workload import (
    EXPERIMENT,
    NOOP,
    DdpSettings,
    Variant,
    build_model,
    cannot_run,
    hook_wire_bytes,
    state_tensors,
    step_buffers,
    variant_ddp_kwargs,
)


def variants(settings: DdpSettings) -> list[Variant]:
    """Every configuration, identical on all ranks."""
    out: list[Variant] = []
    for model in ("source", "mlp"):
        out += [
            Variant(model=model, kind=kinds.SOLO, label="solo (1 rank)"),
            Variant(model=model, kind=kinds.LOCAL, label="no communication"),
            Variant(model=model, kind=kinds.ALL_REDUCE, label="grad all_reduce only"),
            Variant(model=model, kind=kinds.DDP, label="ddp no-op hook (no comm)", hook=NOOP),
            Variant(model=model, kind=kinds.DDP, label="ddp"),
            Variant(model=model, kind=kinds.MANUAL, label="manual all_reduce"),
            Variant(model=model, kind=kinds.MANUAL_COALESCED, label="manual coalesced"),
        ]
        out += [Variant(model=model, kind=kinds.DDP, label=f"ddp hook {h}", hook=h) for h in settings.hooks]
        if model == "mlp":
            out += [
                Variant(model=model, kind=kinds.DDP, label=f"ddp bucket_cap={f:zg}x grad", bucket_fraction=f)
                for f in settings.bucket_fractions
            ]
            out += [
                Variant(
                    model=model, kind=kinds.DDP, label=f"ddp bucket_cap_mb={b:zg}", ddp_kwargs=(("bucket_cap_mb", b),)
                )
                for b in settings.buckets_mb
            ]
            out += [
                Variant(
                    model=model,
                    kind=kinds.DDP,
                    label="ddp gradient_as_bucket_view",
                    ddp_kwargs=(("gradient_as_bucket_view", True),),
                ),
                Variant(model=model, kind=kinds.DDP, label="ddp static_graph", ddp_kwargs=(("static_graph", True),)),
                Variant(
                    model=model,
                    kind=kinds.DDP,
                    label="ddp broadcast_buffers=False",
                    ddp_kwargs=(("broadcast_buffers", False),),
                ),
            ]
            out += [
                Variant(model=model, kind=kinds.ACCUM, label=f"accum x{settings.accum} no_sync", no_sync=True),
                Variant(model=model, kind=kinds.ACCUM, label=f"accum x{settings.accum} sync each"),
            ]
        out += [
            Variant(model=model, kind=kinds.INIT_BROADCAST, label="init: broadcast per tensor"),
            Variant(model=model, kind=kinds.DDP_INIT, label="init: DDP constructor"),
        ]
    return out


def case_id(c: Variant) -> str:
    return f"{c.model}-" + c.label.replace(" ", "_").replace("(", "").replace(")", "").replace(":", "")


def step_bytes(v: Variant, grad: int, settings: DdpSettings) -> Bytes:
    """The byte model: the float32 gradient bytes each rank all-reduces per optimizer step, every
    all_reduce counted (accumulation without no_sync all-reduces the whole gradient per micro-batch)."""
    if not v.kind.communicates or v.hook == NOOP:
        return Bytes(size_bytes=0, count=0, dtype="float32", bw_op=None, definition="none: no communication")
    per_step = settings.accum if v.kind.accumulates and not v.no_sync else 1
    return Bytes(
        size_bytes=per_step * grad,
        count=per_step * grad // 4,
        dtype="float32",
        bw_op="all_reduce",
        definition="float32 gradient bytes each rank all-reduces per optimizer step "
        f"({per_step} all_reduce(s) of the whole gradient)",
        time_includes=None if not v.kind.trains else "forward, backward and the optimizer step",
    )


def _resolve_step(
    v: Variant, settings: DdpSettings, case: Case, ctx: DistContext, cfg: BenchConfig, session: Session
) -> Case:
    reason = support_reason(ctx, lambda: step_buffers(v, ctx, settings, session), v.label)
    if reason:  # e.g. the bf16 hook on Gloo/CPU; the backend's words become the skip reason
        raise CaseSkipped(reason)
    unchecked = unchecked_reason(v, settings)
    model = build_model(v.model, settings, seed=0)
    grad = training.grad_bytes(model)
    byte_model = step_bytes(v, grad, settings)
    fields: dict = {
        "table": v.model,
        "n_params": sum(p.numel() for p in model.parameters()),
        "grad_bytes": grad,
        "batch_per_rank": settings.batch_per_rank,
        "check": "all_reduce of each rank's exact pattern (new each check repetition) equals their sum"
        if not v.kind.trains
        else None
        if unchecked
        else "every rank's params equal single-process training on the global batches (check_rule)",
    }
    if byte_model.bw_op is not None and v.kind.trains:
        fields["allreduces_per_step"] = byte_model.size_bytes // grad
    has_buffers = any(True for _ in model.buffers())
    rule = check_rule(v, ctx.world_size)
    bounded = bn_after_linear(model) is not None
    if has_buffers and not unchecked and v.kind.trains:
        fields["check_buffers"] = buffer_rule(v, rule, bounded)
        fields["check"] += "; its buffers that rank's in it (check_buffers)"
    prov = derived.step_provenance(v, unchecked, has_buffers and (rule.exact or bounded), settings.timed_only == 0)
    fields.update(variant_ddp_kwargs(v, settings))
    if v.bucket_fraction is not None:
        fields["bucket_fraction"] = v.bucket_fraction
    if v.hook:
        fields["hook"] = v.hook
        if v.hook != NOOP:
            fields["wire_bytes"] = hook_wire_bytes(model, v.hook, settings)
            prov["wire_bytes"] = "modelled: fp16/bf16 half the gradient bytes; PowerSGD low-rank P and Q factors"
    if v.kind.accumulates:
        fields["accum_steps"] = settings.accum
        fields["no_sync"] = v.no_sync
    return dataclasses.replace(
        case,
        fields={k: val for k, val in fields.items() if val is not None},
        provenance=prov,
        bytes=byte_model,
        unchecked=unchecked,
    )


def _resolve_init(
    v: Variant, settings: DdpSettings, case: Case, ctx: DistContext, cfg: BenchConfig, session: Session
) -> Case:
    module = build_model(v.model, settings, seed=0)
    size, count = training.state_bytes(module), sum(t.numel() for t in state_tensors(module))
    return dataclasses.replace(
        case,
        fields={
            "table": f"{v.model}-init",
            "n_tensors": len(state_tensors(module)),
            "check": "state identical to rank 0's after one sync",
        },
        provenance={"peak_mem_bytes": derived.STEP["peak_mem_bytes"]},
        bytes=Bytes(
            size_bytes=size,
            count=count,
            dtype="float32",
            bw_op="broadcast",
            definition="float32 bytes of every parameter and buffer rank 0 broadcasts",
            time_includes="the rest of DDP's constructor (parameter checks across ranks, the reducer and its buckets)"
            if v.kind.ddp_wrapped
            else None,
        ),
    )


def _peak_memory(ctx: DistContext):
    from suite.api import PeakMemory

    return PeakMemory(ctx.device)


def _declare(v: Variant, settings: DdpSettings) -> Case:
    init = v.kind.init

    def build(ctx, session):  # a step's check trains the session's shared reference
        if init:
            return init_buffers(v, ctx, settings)
        return step_buffers(v, ctx, settings, session, step_check(v, ctx, settings, session), derived.timed_fields)

    resolved = _resolve_init if init else _resolve_step

    def resolve(case, ctx, cfg, session):  # the sizes and fields are the model's, known once it is built
        return resolved(v, settings, case, ctx, cfg, session)

    # The test id is case_id(v) (unique over both models); the tables show the recorded label v.label.
    return Case(
        experiment=EXPERIMENT,
        op=v.op,
        label=case_id(v),
        record_label=v.label,
        identity={"variant": case_id(v), "model": v.model, "in_place": True},
        # the sizes are the model's, known once it is built (resolve)
        bytes=Bytes(size_bytes=0, count=0, dtype="float32", bw_op=None),
        build=build,
        timing=Timing(mode="blocking"),
        around=_peak_memory,
        names=(v.label,),
        skip=None if init else (lambda ctx, cfg: cannot_run(v, ctx, settings)),
        resolve=resolve,
    )


def ddp_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Every DDP case (the knobs: DDP_PARAMS, DDP_BATCH, DDP_BUCKET_FRACTIONS, DDP_BUCKETS_MB, DDP_HOOKS,
    DDP_ACCUM, DDP_POWERSGD_RANK)."""
    return [_declare(v, cfg.ddp) for v in variants(cfg.ddp)]


test_ddp = experiment_test(ddp_cases)
