"""The sharded experiment's model family and, per strategy, its per-rank construction and one training step.

One model family: ``depth`` pre-norm residual blocks (LayerNorm, Linear(d, 4d), GELU, Linear(4d, d)) and a
Linear(d, d) head, trained with mean-squared error and plain SGD on ``(batch, seq, d)`` activations. Every
strategy starts from the same seeded weights and takes the same global batches (a cycle of ``BATCHES``
seeded batches, step k takes batch k mod BATCHES), so a correct strategy trains the same parameters as one
process (experiments/sharded/check.py).

The strategies are records (experiments/sharded/strategy.py), one file each in experiments/sharded/strategies/;
``parallelize`` builds DDP, FSDP2 and the tensor-parallel plans from their fields, for this model and for a model
of your own (the one trainer: train.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from suite.api import record_of

from .settings import PLANTED, STRATEGIES  # noqa: F401  (the strategy names, with the knobs that choose them)
from .shapes import cannot_run, dp_size, mesh_shape  # noqa: F401  (pure: shapes.py)
from .strategies import get as strategy_of
from .strategy import DP, TP

LR = 0.1
"""SGD learning rate of every strategy and of the reference."""
BATCHES = 4
"""Distinct global batches; step k takes batch k mod BATCHES."""


class Block(nn.Module):
    """Pre-norm residual MLP block: x + down(gelu(up(norm(x))))."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    """``depth`` blocks and a head (under sequence parallelism the blocks' output is gathered before the head:
    experiments/sharded/built_in.py's ``sp_gather``)."""

    def __init__(self, d: int, depth: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.head = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        # Linear on a (batch, seq, d) input returns a view of its 2-D product; FSDP2 warns of a module that returns
        # a view (an in-place op on it would skip the pre-backward all_gather): the output gets its own storage
        return self.head(x).clone()


def build_net(width: int, depth: int, seed: int = 0) -> Net:
    """The model with seeded weights (the same on every rank and in the reference)."""
    torch.manual_seed(seed)
    return Net(width, depth)


def batch(step: int, global_batch: int, seq: int, width: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch (input, target) of step ``step``: seeded, the same everywhere."""
    g = torch.Generator().manual_seed(1000 + step % BATCHES)
    x = torch.randn(global_batch, seq, width, generator=g)
    y = torch.randn(global_batch, seq, width, generator=g)
    return x.to(device), y.to(device)


@dataclass
class Trainer:
    """One rank's model under a strategy and one optimizer step."""

    strategy: str
    model: nn.Module
    """The module whose parameters are checked (DDP's inner module; DTensor parameters for the others)."""
    step: Callable[[], None]
    groups: dict[str, str] = field(default_factory=dict)
    """Process-group name -> mesh dimension (dp, tp) or world, for the inventory."""
    steps: int = 0
    mark: Callable[[str], None] = lambda stage: None
    """Told each part of the step as it starts (forward, backward, optimizer): the inventory listens."""
    owned: list[int] | None = None
    """Indices (in the whole model's parameter order) of the parameters ``model`` holds; None: all of them
    (a pipeline stage holds its layers only)."""
    warned: set[str] = field(default_factory=set)
    """Torch warnings filtered in this trainer's inventory step as harmless (experiments/sharded/quiet.py)."""


def fully_shard_units(units, root: nn.Module, strategy: str, mesh) -> None:
    """FSDP2 under ``strategy`` (workload's and a user model's): ``fully_shard`` each unit with
    the strategy's ``reshard_after_forward``, then the root with FSDP2's default (kept after forward: its backward
    comes first); a ``param_dtype`` other than float32 gathers in it and reduces in float32."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    st = strategy_of(strategy)
    kw: dict = {"mesh": mesh}
    if st.param_dtype != "float32":
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=getattr(torch, st.param_dtype), reduce_dtype=torch.float32)
    for unit in units:
        fully_shard(unit, reshard_after_forward=st.reshard_after_forward, **kw)
    fully_shard(root, **kw)


def ddp(net: nn.Module, ctx, comm_hook: Callable | None, groups: dict) -> nn.Module:
    """``net`` under DDP on the run's group (``comm_hook``: its hook instead of the all_reduce); names that group
    "dp" in ``groups`` (process-group name -> mesh dimension)."""
    kw = {"device_ids": [ctx.device.index]} if ctx.device.type == "cuda" else {}
    model = nn.parallel.DistributedDataParallel(net, process_group=ctx.group, **kw)
    if comm_hook is not None:
        model.register_comm_hook(None, comm_hook)
    groups[ctx.group.group_name] = "dp"
    return model


def group_names(mesh, names: tuple[str, ...]) -> dict[str, str]:
    """Process-group name -> mesh dimension name, for the inventory."""
    return {mesh.get_group(i).group_name: name for i, name in enumerate(names)}


def parallelize(
    strategy: str, net: nn.Module, ctx, mesh_of: Callable, comm_hook, groups: dict, tensor_parallel: Callable, units
) -> nn.Module:
    """``net`` under ``strategy`` (the built-in model's or a user model's): DDP's wrapper on the run's group, or, on
    the strategy's mesh (its groups named in ``groups``), its plan applied by ``tensor_parallel(mesh)`` on the tp
    dimension and FSDP2 on ``units`` and the root over the dp dimension; returns the module to train."""
    st = strategy_of(strategy)
    if st.ddp:
        return ddp(net, ctx, comm_hook, groups)
    shape, names = st.mesh(ctx.world_size)
    mesh = mesh_of(ctx.device.type, shape, names)
    groups |= group_names(mesh, names)
    if st.plan is not None:
        tensor_parallel(mesh[TP] if st.two_d else mesh)
        if st.after_parallelize is not None:  # planted (experiments/sharded/strategies/planted.py)
            st.after_parallelize(net, mesh[TP] if st.two_d else mesh)
    if st.fsdp:
        fully_shard_units(units, net, strategy, mesh[DP] if st.two_d else mesh)
    return net


def world_size() -> int:
    """The default group's size: every strategy's mesh (and pipeline) spans the whole world."""
    import torch.distributed as dist

    return dist.get_world_size()


def make_mesh(device_type: str, shape: tuple[int, ...], names: tuple[str, ...]):
    """A device mesh over the whole world (a 2-D one creates its groups: a collective on every rank)."""
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(device_type, shape, mesh_dim_names=names)


def stepper(trainer: Trainer, model: nn.Module, opt, local: list, loss_fn: Callable, world: int) -> Callable[[], None]:
    """``trainer``'s step: zero_grad, forward, ``loss_fn``, backward, SGD on this rank's batches ``local`` (step k
    takes ``local[k mod BATCHES]``), each part marked for the inventory; a planted strategy's ``after_backward``
    runs before the SGD step."""
    planted = strategy_of(trainer.strategy).after_backward

    def step() -> None:
        x, y = local[trainer.steps % BATCHES]
        opt.zero_grad()
        trainer.mark("forward")
        loss = loss_fn(model(x), y)
        trainer.mark("backward")
        loss.backward()
        trainer.mark("optimizer")
        if planted is not None:  # experiments/sharded/strategies/planted.py
            planted(trainer.model, world)
        opt.step()
        trainer.steps += 1

    return step


def has_functional_collectives(backend: str) -> bool:
    """Whether DTensor's functional collectives reach ``backend``'s group: not a Python process group (BACKEND=mpi:
    suite/harness/mpi/group.py), as they dispatch in C++ to a backend registered for the device (its record's
    ``cannot``)."""
    return "functional_collectives" not in record_of(backend).cannot


def functional_collectives_reason(strategy: str, backend: str) -> str | None:
    """Why ``strategy`` cannot run on ``backend`` (its tensor-parallel plan needs DTensor's functional
    collectives), or None."""
    if has_functional_collectives(backend) or strategy_of(strategy).plan is None:
        return None
    return (
        f"{strategy} needs DTensor's functional collectives, which dispatch in C++ to a backend registered for "
        f"the device and cannot reach the suite's Python process group on {backend} (No backend type associated "
        "with device type cpu); it runs on Gloo"
    )


def full_params(model: nn.Module, functional: bool = True) -> list[torch.Tensor]:
    """Every parameter whole, in ``named_parameters`` order, as float32 (DTensor shards gathered: a
    collective on every rank). ``functional=False``: gathered with c10d's all_gather_object instead of
    DTensor's ``full_tensor`` (a group without ``has_functional_collectives``; a one-dimensional mesh)."""
    from torch.distributed.tensor import DTensor

    out = []
    for _, p in model.named_parameters():
        if isinstance(p, DTensor):
            t = p.full_tensor() if functional else _gathered(p)
        else:
            t = p
        out.append(t.detach().float())
    return out


def _gathered(p) -> torch.Tensor:
    """A DTensor on a one-dimensional mesh (FSDP2's Shard(0), or replicated) whole, through c10d's ops."""
    import torch.distributed as dist

    (placement,) = p.placements
    local = p.to_local().detach()
    if placement.is_replicate():
        return local
    group = p.device_mesh.get_group()
    parts: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(parts, local, group=group)
    return torch.cat(parts, dim=placement.dim)


def local_params(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """(name, this rank's part) of every parameter (a DTensor's local shard): what the optimizer holds here."""
    from torch.distributed.tensor import DTensor

    return [(n, p.to_local() if isinstance(p, DTensor) else p) for n, p in model.named_parameters()]
