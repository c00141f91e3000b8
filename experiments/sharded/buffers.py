"""Each sharded case's Buffers on a rank (experiments/sharded/cases.py declares them): the strategy's trainer
built on the case's model (``model_of``: SHARDED_MODEL's, or the built-in model as a UserModel) by the one trainer
(train.make_trainer) or pipeline trainer (pipeline_train.make_trainer), its check against the one
reference (check.Reference) under the one rule (check.check_rule), and the record's derived fields: the
inventory, c10d's count, compute alone; and the replay of its communication (decompose.py)."""

from __future__ import annotations

from suite.api import Buffers, DistContext, Session, dist_max, verify, watch

from . import check as checking
from . import built_in, decompose, inventory, pipeline, quiet, user_model, pipeline_train, train, workload
from .settings import ShardedSettings
from .strategies import BASELINE
from .strategies import get as strategy_of

EXPERIMENT = "sharded"


def inventory_fields(strategy: str, s: ShardedSettings, world: int, rows: list[dict], commdebug_ops: int) -> dict:
    """The record's inventory fields from a step's rows (pure: the formulas are in cases._PROVENANCE)."""
    theory = inventory.theory(strategy, s.width, s.depth, s.seq, s.batch, world)
    ddp = inventory.theory(BASELINE, s.width, s.depth, s.seq, s.batch, world)
    return inventory.record_fields(
        rows, commdebug_ops, inventory.group_sizes(strategy, world), ddp, theory, bucketed=strategy_of(strategy).ddp
    )


def derive(
    strategy: str, s: ShardedSettings, trainer, ctx: DistContext, m, around, seen: dict, session, um=None
) -> dict:
    from suite.api import PeakMemory

    fields: dict = {}
    if seen:
        fields |= {
            "check_rule": seen["rule"],
            "check_tol": seen["tol"],
            "check_steps": seen["steps"],
            "check_max_abs_diff": dist_max(ctx, [seen["max_abs_diff"]])[0],
        }
    if isinstance(around, PeakMemory):
        fields |= {"peak_mem_bytes": int(dist_max(ctx, [float(around.peak_bytes)])[0])}
        fields["peak_mem_kind"] = around.kind
    if strategy in pipeline.PIPELINES and um is not None:  # p2p, not collectives: experiments/sharded/pipeline.py
        seen_p2p = pipeline.inventory_step(trainer, ctx)
        return fields | pipeline_train.inventory_fields(strategy, um, ctx.world_size, s.microbatches, *seen_p2p)
    if strategy in pipeline.PIPELINES:
        return fields | pipeline.inventory_fields(strategy, s, ctx.world_size, *pipeline.inventory_step(trainer, ctx))
    rows, counted, c10d = inventory.step_inventory(trainer)
    inventory.complete(strategy, rows, c10d, ctx)
    fields["c10d_ops"] = c10d
    fields |= quiet.record_fields(trainer.warned)
    session.once(decompose.inventory_key(strategy, s), lambda: rows)  # what its replay case replays
    session.keep_baseline(decompose.step_key(strategy, s), m)
    fields["compute_s"] = decompose.compute_s(strategy, s, ctx, session, meshes(session), maker(strategy, s, um))
    if um is not None:  # a user model: no theory
        return fields | train.inventory_fields(strategy, um, ctx.world_size, rows, counted)
    return fields | inventory_fields(strategy, s, ctx.world_size, rows, counted)


def maker(strategy: str, s: ShardedSettings, um=None):
    """``make(ctx, mesh_of, comm_hook=None, lr=LR)``: the strategy's trainer of the built-in model, or of ``um``."""
    model = model_of(s, um)
    return lambda ctx, mesh_of, hook=None, lr=workload.LR: train.make_trainer(strategy, ctx, model, mesh_of, hook, lr)


def model_of(s: ShardedSettings, um=None) -> user_model.UserModel:
    """The model a case trains: ``um`` (SHARDED_MODEL), or the built-in model of ``s`` as a UserModel."""
    return um if um is not None else built_in.built_in(s.width, s.depth, s.seq, s.batch)


def reference_of(session: Session, strategy: str, s: ShardedSettings, ctx: DistContext, um=None) -> checking.Reference:
    dp = s.microbatches if strategy in pipeline.PIPELINES else workload.dp_size(strategy, ctx.world_size)
    bf16 = strategy_of(strategy).bf16
    # the one reference, of the case's model (the built-in one's shape is in the key: a pipeline may raise its depth)
    key = (EXPERIMENT, "reference", s.model, s.width, s.depth, s.seq, s.batch, dp, bf16, str(ctx.device))
    return session.once(key, lambda: train.reference(model_of(s, um), dp, ctx.device, bf16))


def meshes(session: Session):
    """``mesh_of`` for make_trainer: one mesh per shape and session."""

    def mesh_of(device_type, shape, names):
        key = (EXPERIMENT, "mesh", device_type, shape, names)
        return session.once(key, lambda: workload.make_mesh(device_type, shape, names))

    return mesh_of


def step_buffers(strategy: str, s: ShardedSettings, ctx: DistContext, session: Session, um=None) -> Buffers:
    """The case's step, check and record; ``um``: the user model sharded_cases loaded (SHARDED_MODEL), or None."""
    rule = checking.built_in(strategy, ctx.world_size, s.depth, s.width, microbatches=s.microbatches)
    if um is not None:  # your own model (experiments/sharded/user_model.py)
        rule = train.check_rule(strategy, ctx.world_size, um, s.microbatches)
    if strategy in pipeline.PIPELINES:
        trainer = pipeline_train.make_trainer(strategy, ctx, model_of(s, um), s.microbatches)
    else:
        trainer = maker(strategy, s, um)(ctx, meshes(session))
    seen: dict = {}

    def check() -> int:
        # every rank gathers the whole parameters (collectives)
        mine = workload.full_params(trainer.model, functional=workload.has_functional_collectives(ctx.backend))
        reference = reference_of(session, strategy, s, ctx, um)
        ref, tols, use = checking.expected(rule, reference, trainer.steps, trainer.owned)  # owned: a stage's
        picked = [i for i, u in enumerate(use) if u]
        wrong, worst, each = checking.compare(
            [mine[i] for i in picked], [ref[i] for i in picked], [tols[i] for i in picked]
        )
        seen.update(steps=trainer.steps, tol=max((tols[i] for i in picked), default=0.0), max_abs_diff=worst)
        seen["rule"] = rule.describe(trainer.steps, seen["tol"], len(picked), len(use))
        names = [n for i, (n, _) in enumerate(trainer.model.named_parameters()) if i in picked]
        return verify.Wrong(wrong, checking.found(wrong, names, each, [tols[i] for i in picked], seen["rule"]))

    b = Buffers(
        call=lambda a: trainer.step(),
        check=check,
        outputs=lambda: [t.detach() for _, t in workload.local_params(trainer.model)],
        unseeded=True,  # every step starts from the seeded model: an output equal to the check run's is not stale
        derive=lambda m, around, session: derive(strategy, s, trainer, ctx, m, around, seen, session, um),
    )
    return b if ctx.check_run else watch.attach(b, ctx, session, trainer.model)  # the fail-slow watch (suite/watch/)


def peak_memory(ctx: DistContext):
    from suite.api import PeakMemory

    return PeakMemory(ctx.device)


def replay_buffers(strategy: str, s: ShardedSettings, ctx: DistContext, session: Session, um=None) -> Buffers:
    mesh_of, make = meshes(session), maker(strategy, s, um)

    def trainer():
        return make(ctx, mesh_of)

    warned: set[str] = set()

    def taken() -> list[dict]:  # the inventory's rows; the warnings its step filtered join ``warned``
        t = trainer()
        rows = inventory.step_inventory(t)[0]
        warned.update(t.warned)
        return rows

    def rows():  # the strategy's case left its inventory in the session; else one is taken now
        return session.once(decompose.inventory_key(strategy, s), taken)

    def step_call():
        t = trainer()
        return lambda async_op: t.step()

    def step():  # likewise the step's measurement
        return session.baseline(decompose.step_key(strategy, s), ctx, step_call)

    b = decompose.replay_build(strategy, s, ctx, session, mesh_of, rows, step, make)
    derive = b.derive
    b.derive = lambda m, around, session: derive(m, around, session) | quiet.record_fields(warned)
    return b
