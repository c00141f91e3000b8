"""Each sharded case's Buffers on a rank (experiments/sharded/cases.py declares them): the strategy's trainer
built on the case's model (``m``: built_in.BuiltIn or yours.Yours, whose ``model()`` is a UserModel) by the one trainer
(train.make_trainer) or pipeline trainer (pipeline_train.make_trainer), its check against the one
reference (check.Reference) under the one rule (check.check_rule), and the record's derived fields: the
inventory, c10d's count, compute alone; and the replay of its communication (decompose.py)."""

from __future__ import annotations

from suite.api import Buffers, DistContext, Session, dist_max, verify, watch

from . import check as checking
from . import decompose, inventory, pipeline, quiet, pipeline_train, train, workload
from .built_in import BuiltIn
from .strategies import get as strategy_of
from .user_model import UserModel
from .yours import Yours

EXPERIMENT = "sharded"

Model = BuiltIn | Yours
"""A case's model: what its case declares of it, its theory, the UserModel its trainers train (``model()``)."""


def derive(strategy: str, m: Model, trainer, ctx: DistContext, measured, around, seen: dict, session) -> dict:
    """The record's derived fields of ``strategy``'s step on the case's model ``m``: the check's, the peak memory,
    the inventory against the model's theory (a pipeline's p2p ops: experiments/sharded/pipeline.py), c10d's
    count, compute alone."""
    from suite.api import PeakMemory

    s, world = m.s, ctx.world_size
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
    ddp = train.ddp_theory(m.n_params())
    if strategy in pipeline.PIPELINES:  # p2p, not collectives
        rows, scheduled, c10d = pipeline.inventory_step(trainer, ctx)
        return fields | pipeline.p2p_fields(rows, scheduled, c10d, m.theory(strategy, world), ddp, world)
    rows, counted, c10d = inventory.step_inventory(trainer)
    inventory.complete(strategy, rows, c10d, ctx)
    fields["c10d_ops"] = c10d
    fields |= quiet.record_fields(trainer.warned)
    session.once(decompose.inventory_key(strategy, s), lambda: rows)  # what its replay case replays
    session.keep_baseline(decompose.step_key(strategy, s), measured)
    fields["compute_s"] = decompose.compute_s(strategy, s, ctx, session, meshes(session), maker(strategy, m.model()))
    return fields | train.inventory_fields(strategy, m.n_params(), world, rows, counted, m.theory(strategy, world))


def maker(strategy: str, model: UserModel):
    """``make(ctx, mesh_of, comm_hook=None, lr=LR)``: the strategy's trainer of ``model`` (a UserModel)."""
    return lambda ctx, mesh_of, hook=None, lr=workload.LR: train.make_trainer(strategy, ctx, model, mesh_of, hook, lr)


def reference_of(session: Session, strategy: str, m: Model, ctx: DistContext) -> checking.Reference:
    s = m.s
    dp = s.microbatches if strategy in pipeline.PIPELINES else workload.dp_size(strategy, ctx.world_size)
    bf16 = strategy_of(strategy).bf16
    # the one reference, of the case's model (the built-in one's shape is in the key: a pipeline may raise its depth)
    key = (EXPERIMENT, "reference", s.model, s.width, s.depth, s.seq, s.batch, dp, bf16, str(ctx.device))
    return session.once(key, lambda: train.reference(m.model(), dp, ctx.device, bf16))


def meshes(session: Session):
    """``mesh_of`` for make_trainer: one mesh per shape and session."""

    def mesh_of(device_type, shape, names):
        key = (EXPERIMENT, "mesh", device_type, shape, names)
        return session.once(key, lambda: workload.make_mesh(device_type, shape, names))

    return mesh_of


def step_buffers(strategy: str, m: Model, ctx: DistContext, session: Session) -> Buffers:
    """The case's step, check and record on its model ``m`` (built_in.BuiltIn or yours.Yours)."""
    s = m.s
    model = m.model()
    rule = train.check_rule(strategy, ctx.world_size, model, s.microbatches)
    if strategy in pipeline.PIPELINES:
        trainer = pipeline_train.make_trainer(strategy, ctx, model, s.microbatches)
    else:
        trainer = maker(strategy, model)(ctx, meshes(session))
    seen: dict = {}

    def check() -> int:
        # every rank gathers the whole parameters (collectives)
        mine = workload.full_params(trainer.model, functional=workload.has_functional_collectives(ctx.backend))
        reference = reference_of(session, strategy, m, ctx)
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
        derive=lambda measured, around, session: derive(strategy, m, trainer, ctx, measured, around, seen, session),
    )
    return b if ctx.check_run else watch.attach(b, ctx, session, trainer.model)  # the fail-slow watch (suite/watch/)


def peak_memory(ctx: DistContext):
    from suite.api import PeakMemory

    return PeakMemory(ctx.device)


def replay_buffers(strategy: str, m: Model, ctx: DistContext, session: Session) -> Buffers:
    s = m.s
    mesh_of, make = meshes(session), maker(strategy, m.model())

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
