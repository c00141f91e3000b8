"""Sharded training: what one training step of FSDP2, tensor parallel, sequence parallel and a 2-D mesh
moves, on which groups, what it costs, and whether it trains what one process trains.

One case per strategy (``SHARDED_STRATEGIES``; experiments/sharded/workload.py builds each) on one model
family sized by ``SHARDED_WIDTH``, ``SHARDED_DEPTH``, ``SHARDED_SEQ`` and ``SHARDED_BATCH``. Every case
times one optimizer step (zero_grad, forward, mean-squared-error loss, backward, SGD step) through the
harness in blocking mode (ranks meet at a barrier, each sample is one step, the sample is the slowest
rank's time): ``time_includes`` says so, and the record has no nccl-tests bus bandwidth.

Checked (experiments/sharded/check.py): after the check step and after the timed steps every rank's whole
parameters against single-process training on the same global batches, ``exact`` or a per-parameter
tolerance (``check_rule``, ``check_tol`` in the record).

Inventoried (experiments/sharded/inventory.py): after the timed steps one more step runs under a
CommDebugMode that lists its collectives: ``inventory`` (op, dtype, S bytes, group by mesh dimension,
phase forward/backward/optimizer, count), ``inventory_bytes`` (their S total), ``inventory_ops``,
``commdebug_ops`` (CommDebugMode's own count of the same step), beside ``theory`` and ``theory_bytes``
from the shapes alone and ``inventory_matches_theory``. ``bus_bytes`` is what one rank sends per step
by nccl-tests' algorithms, ``bus_bytes_gloo`` with Gloo's reduce_scatter as the all_reduce it is, and
``bus_vs_ddp`` the first over DDP's on the same model and world (theory: FSDP2 1.5).

Decomposed (experiments/sharded/decompose.py): each strategy's case also records ``compute_s``, the same
step on torch's fake process groups (no communication), and is followed by the case ``replay-<strategy>``
(op ``comm_replay``): its inventory's collectives replayed alone on the same groups, checked exactly, whose
record derives the step's exposed and hidden communication.

The pipeline strategies (``pp_*``) are built, inventoried (point-to-point, not CommDebugMode) and described
by experiments/sharded/pipeline.py; each rank checks its stage's parameters.

With ``SHARDED_MODEL=module:function`` the cases run your own model instead (experiments/sharded/user_model.py
and train.py; its pipelines pipeline_train.py): the strategies it can take, checked, inventoried and
decomposed the same way, theory not modelled but for the pipelines' messages.

On CPU FSDP2 issues every collective synchronously (no overlap with compute) and DTensor has no CPU
all_to_all (it all-gathers instead); ``cpu_notes`` in the record says so where it applies.
"""

from __future__ import annotations

import dataclasses

from suite.api import (
    BenchConfig,
    Case,
    DistContext,
    Session,
    Timing,
    experiment_test,
)

from . import check as checking
from . import buffers, built_in, decompose, pipeline, quiet, user_model, workload, yours
from .strategies import get as strategy_of

EXPERIMENT = "sharded"

_TIME_INCLUDES = "forward, loss, backward and the SGD step of one training step (communication inside)"
_CPU_NOTES = (
    "CPU: FSDP2 issues every collective synchronously (no overlap with compute); DTensor has no CPU "
    "all_to_all (all_gather + chunk instead); Gloo's reduce_scatter is an all_reduce of the whole buffer"
)

_PROVENANCE = {
    "inventory": "measured: CommDebugMode (torch.distributed.tensor.debug) around one step after the timed steps, "
    "this rank's collectives (every rank issues the same): op, dtype, S bytes, group by mesh dimension, phase",
    "inventory_bytes": "derived: sum of count x bytes over inventory",
    "inventory_ops": "derived: sum of count over inventory",
    "commdebug_ops": "measured: CommDebugMode.get_total_counts() of the same step",
    "c10d_ops": "measured: per mesh dimension, the change of c10d's sequence number of its process group over the "
    "same step (every op issued on it, any thread); a count other than the inventory's fails the case",
    "theory": "modelled: experiments.sharded.shapes.theory from width, depth, seq, batch and world",
    "theory_bytes": "derived: sum of count x bytes over theory",
    "inventory_matches_theory": "derived: per (op, dtype, group, phase) the same count and bytes "
    "(ddp: the same bytes; DDP's buckets split them)",
    "bus_bytes": "derived: sum over inventory of count x bytes x factor, factor 2(n-1)/n all_reduce, "
    "(n-1)/n all_gather and reduce_scatter, n the group's size (nccl-tests' busbw factors)",
    "bus_bytes_gloo": "derived: as bus_bytes with reduce_scatter at 2(n-1)/n (Gloo runs an all_reduce and slices)",
    "ddp_bus_bytes": "modelled: bus_bytes of DDP's theory on the same model and world (2(n-1)/n x 4P)",
    "bus_vs_ddp": "derived: bus_bytes / ddp_bus_bytes",
    "check_steps": "measured: optimizer steps the checked model had taken when compared with the reference",
    "check_max_abs_diff": "measured: max over ranks and parameters of |param - reference param| after the timed steps",
    "check_tol": "modelled: the largest over parameter tensors of " + checking.FORMULA + " (0 when exact)",
    "peak_mem_bytes": "measured: suite.harness.profiling.PeakMemory around warm-up and the timed steps, max over ranks",
    "compute_s": decompose.PROVENANCE["compute_s"],
    "torch_warnings_filtered": quiet.PROVENANCE,
}


def _skip(strategy: str, m: buffers.Model, ctx: DistContext) -> str | None:
    if ctx.world_size != workload.world_size():
        return f"{strategy} runs on a device mesh over the whole world, not a group of {ctx.world_size} ranks"
    if workload.functional_collectives_reason(strategy, ctx.backend):
        return workload.functional_collectives_reason(strategy, ctx.backend)
    return m.cannot_run(strategy, ctx.world_size)


def _mesh_text(strategy: str, world: int) -> str:
    shape, names = strategy_of(strategy).mesh(world)
    return "x".join(map(str, shape)) + f" ({','.join(names)})"


def _declare(strategy: str, m: buffers.Model, world: int) -> Case:
    """``strategy``'s step case on the case's model ``m``: the built-in model (built_in.BuiltIn) or SHARDED_MODEL's
    (yours.Yours), whose ``declared`` gives what is the model's (identity, byte model, size, a pipeline's stages);
    a strategy the model cannot take here is skipped with why."""
    identity, nbytes, own, provenance = m.declared(strategy, world, _TIME_INCLUDES)
    fields = {
        "table": "sharded",
        "mesh": _mesh_text(strategy, world),
        "dp_size": workload.dp_size(strategy, world),
        "cpu_notes": _CPU_NOTES,
    }
    st = strategy_of(strategy)
    if st.fsdp and not st.two_d:
        fields["reshard_after_forward"] = f"blocks {st.reshard_after_forward}"
    if st.planted and st.pipeline is None:  # a pipeline's own fields say it, with why (pipeline.stage_fields)
        fields["planted"] = "wrong on purpose (the check's own test)"
    if strategy in pipeline.PIPELINES:
        identity["microbatches"] = m.s.microbatches
    return Case(
        experiment=EXPERIMENT,
        op="train_step",
        label=strategy,
        identity={"strategy": strategy} | identity,
        bytes=nbytes,
        build=lambda ctx, session: buffers.step_buffers(strategy, m, ctx, session),
        fields=fields | own,
        provenance=_PROVENANCE | provenance,
        timing=Timing(mode="blocking"),
        around=buffers.peak_memory,
        skip=lambda ctx, cfg: _skip(strategy, m, ctx),
        resolve=_on_device,
    )


def _on_device(case: Case, ctx: DistContext, cfg: BenchConfig, session: Session) -> Case:
    """The case on this run's device: ``cpu_notes`` (what Gloo on CPU does differently: no overlap, the
    all_to_all fallback, Gloo send/recv) is kept on CPU only."""
    if ctx.device.type == "cpu":
        return case
    return dataclasses.replace(case, fields={k: v for k, v in case.fields.items() if k != "cpu_notes"})


def _declare_replay(strategy: str, m: buffers.Model, world: int) -> Case:
    """The replay of ``strategy``'s communication (decompose.py) on the case's model ``m``."""
    step = _declare(strategy, m, world)
    return dataclasses.replace(
        step,
        op="comm_replay",
        label=f"replay-{strategy}",
        bytes=dataclasses.replace(
            step.bytes,
            definition=step.bytes.definition.removesuffix(built_in.ISSUED) + " (replay_bytes: what the replay issued)",
            time_includes=None,
        ),
        fields={
            **{k: v for k, v in step.fields.items() if k not in ("check", "planted")},
            "check": "every replayed collective's output equals its exact expected value (suite/ops/collectives.py)",
            "replays": "the collectives of one training step of the strategy (its inventory), blocking, in turn",
        },
        provenance=decompose.PROVENANCE,
        build=lambda ctx, session: buffers.replay_buffers(strategy, m, ctx, session),
        around=None,
    )


def sharded_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """One case per strategy (the knobs: SHARDED_WIDTH, SHARDED_DEPTH, SHARDED_SEQ, SHARDED_BATCH,
    SHARDED_STRATEGIES, SHARDED_MICROBATCHES), each collective strategy followed by the replay of its
    communication (experiments/sharded/decompose.py; a pipeline's is point-to-point, which it does not replay)."""
    s = cfg.sharded
    um = user_model.load(s.model) if s.model else None  # the factory runs once here, on each rank
    out = []
    for st in s.strategies:
        m = yours.Yours(um, s) if um else built_in.BuiltIn(s.for_strategy(st, world_size), s.depth)
        out.append(_declare(st, m, world_size))
        if st not in pipeline.PIPELINES:
            out.append(_declare_replay(st, m, world_size))
    return out


test_sharded = experiment_test(sharded_cases)
