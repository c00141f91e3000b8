"""The one trainer of the sharded experiment: a ``UserModel`` (your own, ``SHARDED_MODEL``, experiments/sharded/
user_model.py, or the built-in model declared as one, built_in.py) on a rank under a 1-D or 2-D strategy, and
the one single-process reference, check rule and record's inventory fields of either (the built-in model's theory:
built_in.BuiltIn). The pipeline strategies' trainer: pipeline_train.py.

DDP wraps the module; FSDP2 ``fully_shard``s each unit (``UserModel.fsdp_units``, else each child with
parameters) and then the root; ``tp`` applies the model's ``tp_plan`` with ``parallelize_module`` on a 1-D mesh
over the world; ``2d`` the plan on the tp dimension of a (2, world/2) mesh and FSDP2 on its dp dimension; ``sp``
the ``sp_plan`` on a 1-D mesh, each rank its slice of the inputs along ``seq_dim``, the output gathered along it
before the loss (the built-in model's before its head). Every rank takes its rows of the global batch (``tp``,
``sp``: all of them), the model's loss, SGD at workload.LR.

Every function here takes the ``UserModel`` that the cases loaded once on this rank (cases.sharded_cases calls
user_model.load); a trainer and the reference each train a copy of its module (``fresh``), which stays as
the factory built it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import torch
import torch.nn as nn

from suite.api import sgd_rule

from . import check as checking
from . import inventory, workload
from .strategies import get as strategy_of
from .user_model import UserModel, contraction, dp_size, plan_of

NOT_MODELLED = "not modelled: the shapes of a user model's collectives are not derived (SHARDED_MODEL)"


def fresh(um: UserModel) -> UserModel:
    """``um`` with a copy of its module, for one trainer or the reference to shard and train."""
    return dataclasses.replace(um, module=copy.deepcopy(um.module))


def fsdp_units(um: UserModel) -> list[nn.Module]:
    """The submodules FSDP2 shards before the root (UserModel.fsdp_units)."""
    if um.fsdp_units is not None:
        named = dict(um.module.named_modules())
        return [named[n] for n in um.fsdp_units]
    out = []
    for child in um.module.children():
        parts = list(child.children()) if isinstance(child, (nn.ModuleList, nn.ModuleDict, nn.Sequential)) else [child]
        out += [m for m in parts if any(True for _ in m.parameters())]
    return out


def _tensor_parallel(um: UserModel, strategy: str, mesh) -> None:
    from torch.distributed.tensor.parallel import parallelize_module

    # every rank built the same seeded model: each takes its own shard (no scatter from rank 0)
    parallelize_module(um.module, mesh, dict(plan_of(um, strategy)), src_data_rank=None)
    if strategy_of(strategy).sequence_parallel and um.sp_gather:  # the sequence whole from that submodule on
        before = dict(um.module.named_modules())[um.sp_gather]
        before.register_forward_pre_hook(lambda m, args: (_whole(args[0], args[0], mesh, um.seq_dim), *args[1:]))
    elif strategy_of(strategy).sequence_parallel:
        um.module.register_forward_hook(lambda m, args, out: _whole(out, args[0], mesh, um.seq_dim))


def _whole(out, local_input, mesh, seq_dim: int) -> torch.Tensor:
    """The module's output whole on every rank: a local slice of the sequence gathered along ``seq_dim`` (a
    DTensor made whole whatever its placement); its backward takes each rank's slice of the gradient. An output
    that is not this rank's slice is a plan that does not fit sp: ValueError saying so."""
    from torch.distributed.tensor import DTensor, Shard

    if isinstance(out, DTensor):
        return out.full_tensor()
    why = sp_output_problem(out, local_input, seq_dim)
    if why:
        raise ValueError(why)
    return DTensor.from_local(out, mesh, [Shard(seq_dim)], run_check=False).full_tensor()


def sp_output_problem(out, local_input, seq_dim: int) -> str | None:
    """Why a plain output cannot be gathered as this rank's slice of the sequence (sp), or None: it must be one
    tensor with as many positions along ``seq_dim`` as the rank's slice of the input."""
    if not isinstance(out, torch.Tensor):
        return f"sp: the module returned {type(out).__name__}, not one tensor: sp gathers its output along seq_dim"
    want = local_input.shape[seq_dim]
    if out.dim() <= seq_dim or out.shape[seq_dim] != want:
        return (
            f"sp: the module's output has shape {tuple(out.shape)}, not this rank's slice of the sequence ({want} "
            f"positions along seq_dim={seq_dim}, as its input): the sp_plan must leave the output sharded along "
            f"seq_dim (e.g. RowwiseParallel(output_layouts=Shard({seq_dim}))) for the gather before the loss"
        )
    return None


def _local_batches(um: UserModel, strategy: str, world: int, rank: int, device) -> list[tuple]:
    """This rank's (inputs, targets) of every batch: its rows of the data-parallel shards, and under ``sp`` its
    slice of the inputs along ``seq_dim`` (the targets whole: the output is gathered)."""
    dp = dp_size(strategy, world)
    dp_rank = rank // (world // dp) if dp > 1 else 0
    out = []
    for k in range(workload.BATCHES):
        x, y = um.batch(k)
        n = len(x) // dp
        x, y = x[dp_rank * n : (dp_rank + 1) * n], y[dp_rank * n : (dp_rank + 1) * n]
        if strategy_of(strategy).sequence_parallel:
            span = x.shape[um.seq_dim] // world
            x = x.narrow(um.seq_dim, rank * span, span).contiguous()
        out.append((x.to(device), y.to(device)))
    return out


def make_trainer(
    strategy: str,
    ctx,
    loaded: UserModel,
    mesh_of: Callable = workload.make_mesh,
    comm_hook: Callable | None = None,
    lr: float = workload.LR,
) -> workload.Trainer:
    """This rank's copy of the loaded model under ``strategy``, its SGD and step (``comm_hook``, ``lr``: as
    workload.make_trainer's, for the step without communication)."""
    import torch.distributed as dist

    world, rank, device = ctx.world_size, ctx.rank, ctx.device
    um = fresh(loaded)
    net = um.module.to(device)
    groups = {dist.group.WORLD.group_name: "world"}
    tensor_parallel = lambda mesh: _tensor_parallel(um, strategy, mesh)  # noqa: E731
    model = workload.parallelize(strategy, net, ctx, mesh_of, comm_hook, groups, tensor_parallel, fsdp_units(um))
    local = _local_batches(um, strategy, world, rank, device)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    trainer = workload.Trainer(strategy=strategy, model=net, step=lambda: None, groups=groups)
    trainer.step = workload.stepper(trainer, model, opt, local, um.loss, world)
    return trainer


def reference(loaded: UserModel, dp: int, device, bf16: bool = False) -> checking.Reference:
    """Single-process SGD of a copy of the user's model on its global batches, the rows split into ``dp`` shards,
    with its loss (check.Reference; ``bf16``: FSDP2's mixed-precision policy)."""

    def build():
        um = fresh(loaded)
        return um.module.to(device), [tuple(t.to(device) for t in um.batch(k)) for k in range(workload.BATCHES)]

    return checking.Reference(build, dp, bf16, loaded.loss)


def layers(um: UserModel) -> int:
    """The layers that round an activation in bfloat16: ``um.layers``, else the modules of ``um`` that hold
    parameters of their own (Linear, norm, embedding, ...)."""
    if um.layers is not None:
        return um.layers
    return sum(1 for m in um.module.modules() if any(True for _ in m.parameters(recurse=False)))


def check_rule(strategy: str, world: int, um: UserModel, microbatches: int = 1) -> sgd_rule.SgdRule:
    """The check's rule on the user's model: R from its plan's largest row-parallel contraction and, with bfloat16
    parameters, its layers (``microbatches``: SHARDED_MICROBATCHES, for the pipelines)."""
    return checking.check_rule(
        strategy, world, contraction=contraction(um, strategy), layers=layers(um), microbatches=microbatches
    )


def n_params(um: UserModel) -> int:
    return sum(p.numel() for p in um.module.parameters())


def ddp_theory(n_params: int) -> list[dict]:
    """DDP's collectives on a model of ``n_params`` parameters, the baseline of ``bus_vs_ddp``: one all_reduce of
    its float32 gradients, 2(n-1)/n x 4P bus bytes."""
    return [{"op": "all_reduce", "dtype": "float32", "bytes": 4 * n_params, "group": "dp", "count": 1}]


def inventory_fields(strategy: str, n_params: int, world: int, rows: list[dict], commdebug_ops: int, theory) -> dict:
    """The record's inventory fields of a step (pure: the formulas are in cases._PROVENANCE) against ``theory``,
    the rows the model's theory says the step issues (None: not modelled, and ``theory_note`` says so), and DDP's
    on the same model (``ddp_theory``)."""
    sizes = inventory.group_sizes(strategy, world)
    bucketed = strategy_of(strategy).ddp
    fields = inventory.record_fields(rows, commdebug_ops, sizes, ddp_theory(n_params), theory, bucketed=bucketed)
    return fields if theory is not None else fields | {"theory_note": NOT_MODELLED}
