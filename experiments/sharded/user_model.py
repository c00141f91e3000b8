"""Your own model under the sharded strategies: ``SHARDED_MODEL=module:function`` names a factory that returns a
``UserModel``; the experiment then runs it under each strategy it supports, checked against one process.

The factory takes no argument and returns ``UserModel(module=..., batch=..., loss=..., tp_plan=..., sp_plan=...,
seq_dim=..., sp_gather=..., fsdp_units=..., pp_layers=..., layers=...)``. It is called twice on the host (the
launcher's check compares the two, before any rank starts) and once on every rank, where the cases are declared
(cases.sharded_cases, which hands the result to every case), each time after ``torch.manual_seed(0)``; each case's
trainer and the single-process reference train their own copy (``copy.deepcopy``) of the module that call built. It
must build the same weights each time (seeded initialisation does: the ranks' calls must agree), and
``batch(step)`` must return the same global batch for the same step. Step k trains on ``batch(k mod BATCHES)``.

Strategies (``supported``): ``ddp``, ``fsdp2``, ``fsdp2_keep``, ``fsdp2_bf16`` (and the planted
``fsdp2_scaled``) always; ``tp`` and ``2d`` only with a ``tp_plan``; ``sp`` only with an ``sp_plan`` (its inputs
split along ``seq_dim``); the pipelines (``pp_gpipe``, ``pp_1f1b``, ``pp_interleaved`` and the planted
``pp_unscaled``, ``pp_misrouted``) only with ``pp_layers``, the forward's pieces in order, which are cut into
contiguous stages as the built-in model's layers are. ``tp_wrong_shard`` runs on the built-in model only.

Checked here, on the host, before any rank starts (``check_world``, exit 2 with one line): the name is
``module:function``, the module imports, the function exists and returns a ``UserModel`` whose ``module`` is a
``torch.nn.Module``, two calls give a new module with the same weights and the same ``batch(0)``, the module can be
copied, the batch's rows divide into the strategies' data-parallel shards, each Linear that the ``tp_plan``
(``sp_plan`` under sp) shards divides over the tensor-parallel ranks, the inputs' ``seq_dim`` divides over the
world (sp), the 2-D mesh (2 x world/2) divides the world, and every strategy asked for by name
(``SHARDED_STRATEGIES`` other than its default) is one the model supports. With ``pp_layers`` and a pipeline
strategy (experiments/sharded/user_pieces.py): its pieces are the module's own submodules, hold every parameter
once, each returns one tensor, and applied in order to ``batch(0)``'s inputs they give the module's output and
every parameter's gradient bit for bit; every batch has batch(0)'s shapes, its rows split into
``SHARDED_MICROBATCHES``, there are at least as many pieces as stages, every rank's stages hold a parameter and
every boundary's activation requires grad.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from suite.api import ConfigError, user_model


from .settings import STRATEGIES
from .shapes import dp_size, mesh_cannot  # the built-in model's mesh rules (shapes.py)
from .strategies import get as strategy_of
from .strategy import SP_PLAN, TP_PLAN
from .user_pieces import pp_problem, stages_problem

_A_PLAN = {TP_PLAN: "a tp_plan", SP_PLAN: "an sp_plan"}

# What a factory returns, its loader and its reproducibility check are the core's (suite.ops.user_model, which
# other experiments read SHARDED_MODEL with too); the sharded rules below build on them.
UserModel = user_model.UserModel
load = user_model.load
not_reproducible = user_model.not_reproducible


def supported(um: UserModel, strategy: str) -> str | None:
    """Why ``um`` cannot take ``strategy`` (whatever the world size), or None."""
    st = strategy_of(strategy)
    if st.built_in_only:
        return f"{strategy} runs on the built-in model only: {st.built_in_only}"
    if st.pipeline is not None:
        return None if um.pp_layers else f"{strategy} needs pp_layers (the forward's pieces), and the model names none"
    if st.plan is not None and not getattr(um, st.plan):
        return f"{strategy} needs {_A_PLAN[st.plan]}, and the model names none"
    return None


def plan_of(um: UserModel, strategy: str) -> Mapping[str, Any]:
    """The plan ``strategy`` applies (its ``plan``: the model's ``tp_plan`` or ``sp_plan``; empty where the strategy
    applies none or the model names none)."""
    plan = strategy_of(strategy).plan
    return (getattr(um, plan) if plan else None) or {}


def _planned_linears(um: UserModel, strategy: str) -> list[tuple[str, Any, str]]:
    """(name, module, 'colwise' | 'rowwise') of each Linear ``strategy``'s plan shards (wildcards as
    parallelize_module reads them: ``*`` for one level of the name)."""
    import fnmatch

    import torch.nn as nn
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    out = []
    for pattern, style in plan_of(um, strategy).items():
        kind = {ColwiseParallel: "colwise", RowwiseParallel: "rowwise"}.get(type(style), "")
        for name, m in um.module.named_modules():
            if kind and isinstance(m, nn.Linear) and fnmatch.fnmatchcase(name, pattern):
                out.append((name, m, kind))
    return out


def contraction(um: UserModel, strategy: str) -> int:
    """The largest ``in_features`` of a Linear ``strategy``'s plan makes row-parallel (its dot products are split
    over ranks), or 0."""
    return max((m.in_features for _, m, kind in _planned_linears(um, strategy) if kind == "rowwise"), default=0)


def not_dividing(um: UserModel, strategy: str, world: int, microbatches: int = 1) -> str | None:
    """Why the model's batch or a parameter the plan shards does not divide over the strategy's ranks, or the
    batch into a pipeline's ``microbatches`` (split_problem), or its seq_dim cannot be split (sp)."""
    if strategy_of(strategy).sequence_parallel:
        x, d = um.batch(0)[0], um.seq_dim
        if not isinstance(d, int) or isinstance(d, bool) or d < 1:
            return f"{strategy}: seq_dim={d!r} must be an int >= 1 (dimension 0 is the batch's rows)"
        if x.dim() <= d:
            return (
                f"{strategy}: the model's inputs have {x.dim()} dimensions, no seq_dim={d} to split over {world} ranks"
            )
        if why := sp_layout_problem(um.sp_plan or {}, d, x.dim()):
            return f"{strategy}: {why}"
        if um.sp_gather is not None and um.sp_gather not in dict(um.module.named_modules()):
            return f"{strategy}: sp_gather={um.sp_gather!r} names no submodule of the model"
    return split_problem(strategy, world, splits(um, strategy), microbatches)


def sp_layout_problem(plan: Mapping[str, Any], seq_dim: int, ndim: int) -> str | None:
    """A style of an sp_plan that puts the sequence on a dimension other than ``seq_dim`` (of ``ndim``-dimensional
    activations), or None: a column-parallel Linear's ``input_layouts``, a row-parallel one's ``output_layouts``
    and SequenceParallel's ``sequence_sharding`` are where the sequence is sharded (a Shard(-1) elsewhere in
    them is the features' split)."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel

    where = ((ColwiseParallel, "input_layouts"), (RowwiseParallel, "output_layouts"))
    where += ((SequenceParallel, "sequence_sharding"),)
    for pattern, style in plan.items():
        for kind, attr in where:
            for p in getattr(style, attr, ()) if isinstance(style, kind) else ():
                if isinstance(p, Shard) and p.dim % ndim != seq_dim:
                    name = f"{pattern} ({type(style).__name__})"
                    return f"sp_plan's {name} shards the sequence along dim {p.dim} ({attr}), not seq_dim={seq_dim}"
    return None


def splits(um: UserModel, strategy: str) -> dict:
    """What must divide at a world size, as plain numbers (each case's record keeps them: make predict checks
    another world size with split_problem, without the model): the batch's ``rows``, the inputs' ``positions``
    along ``seq_dim`` (sp; else None), and ``sharded``, each Linear the strategy's plan shards as [name, kind, the
    features it splits]."""
    x = um.batch(0)[0]
    d = um.seq_dim
    sp = strategy_of(strategy).sequence_parallel and isinstance(d, int) and not isinstance(d, bool) and 1 <= d < x.dim()
    sharded = []
    if strategy_of(strategy).plan is not None:
        for name, m, kind in _planned_linears(um, strategy):
            sharded.append([name, kind, m.out_features if kind == "colwise" else m.in_features])
    return {"rows": len(x), "positions": int(x.shape[d]) if sp else None, "seq_dim": d, "sharded": sharded}


def split_problem(strategy: str, world: int, split: dict, microbatches: int = 1) -> str | None:
    """Why ``split`` (``splits``) does not divide over ``strategy``'s ranks at ``world`` or into a pipeline's
    ``microbatches``, or None (pure: no torch)."""
    dp = dp_size(strategy, world)
    rows = split["rows"]
    if rows % dp:
        return f"{strategy}: the model's batch has {rows} rows, which do not split into {dp} data-parallel shards"
    if strategy_of(strategy).pipeline is not None and rows % microbatches:
        return (
            f"{strategy}: the model's batch has {rows} rows, which do not split into SHARDED_MICROBATCHES="
            f"{microbatches} equal micro-batches"
        )
    tp = world // dp
    if split.get("positions") is not None and split["positions"] % tp:
        has = f"{split['positions']} positions along seq_dim={split['seq_dim']}"
        return f"{strategy}: the model's inputs have {has}, which do not split over {tp} ranks"
    which = strategy_of(strategy).plan
    for name, kind, n in split.get("sharded", ()):
        if n % tp:
            side = "out_features" if kind == "colwise" else "in_features"
            return f"{strategy}: {which} shards {name} ({kind}, {side}={n}), which does not split over {tp} ranks"
    return None


def stages_cannot(um: UserModel, strategy: str, world: int, microbatches: int) -> str | None:
    """Why a pipeline cannot cut the model's pp_layers into its stages at this world (or its schedule cannot
    take these micro-batches: pipeline.cannot_run), or a rank would train nothing or a boundary carry no gradient
    (user_pieces.stages_problem), or None."""
    if strategy_of(strategy).pipeline is None or not um.pp_layers:
        return None
    from .pipeline import cannot_run as pipeline_cannot

    n = len(um.pp_layers(um.module))
    if why := pipeline_cannot(strategy, world, 0, microbatches, pieces=n):
        return why
    if len(um.batch(0)[0]) % microbatches:  # not_dividing names it: no micro-batch to run the pieces on
        return None
    return stages_problem(um, strategy, world, microbatches)


def cannot_run(um: UserModel, strategy: str, world: int, microbatches: int = 1) -> str | None:
    """Why ``um`` cannot take ``strategy`` at this world size (a case's skip reason), or None; ``microbatches``:
    SHARDED_MICROBATCHES, for the pipelines."""
    skipped = (
        supported(um, strategy) or mesh_cannot(strategy, world) or stages_cannot(um, strategy, world, microbatches)
    )
    return skipped or not_dividing(um, strategy, world, microbatches)


def check_world(s, world: int, cfg=None) -> None:
    """The launcher's check of SHARDED_MODEL before any rank starts (module docstring); ConfigError. A strategy
    asked for by name must run; of the default list, the model's unsupported strategies and a mesh this
    world cannot hold are skipped with their reason, but a batch or parameter that does not divide is an error.
    ``cfg``: the run's whole config (unused: the sharded settings hold SHARDED_MODEL)."""
    if not s.model:
        return
    um = load(s.model)
    why = not_reproducible(um, load(s.model))
    if why:
        raise ConfigError(f"SHARDED_MODEL={s.model}: {why}")
    if any(strategy_of(st).pipeline is not None for st in s.strategies) and um.pp_layers and (why := pp_problem(um)):
        raise ConfigError(f"SHARDED_MODEL={s.model}: {why}")
    explicit = tuple(s.strategies) != STRATEGIES
    where = f"SHARDED_STRATEGIES={','.join(s.strategies)}" if explicit else f"{world} ranks"
    for st in s.strategies:
        skipped = supported(um, st) or mesh_cannot(st, world) or stages_cannot(um, st, world, s.microbatches)
        why = skipped if explicit else None
        why = why or (None if skipped else not_dividing(um, st, world, s.microbatches))
        if why:
            raise ConfigError(f"SHARDED_MODEL={s.model} with {where}: {why}")
