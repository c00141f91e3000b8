"""Models, data and training steps shared by the DDP experiment, its tests and the example.

The source article's complete example (``examples/ddp_source_example.py``) trains
``nn.Linear(1024, 10)`` on 10,000 random samples, batch 32 per rank, SGD lr 0.01,
CrossEntropyLoss, a ``DistributedSampler`` with ``set_epoch`` every epoch, 5 epochs.
``SOURCE`` holds those numbers; ``source_model``/``make_dataset`` build the same
objects, seeded so that every rank holds *the same* dataset (the article draws it
with an unseeded ``torch.randn`` in every process, which gives each rank a different
dataset; ``DistributedSampler`` assumes one dataset indexed the same everywhere).

``mlp`` is the communication-heavier model: an MLP whose hidden width is chosen to
reach a parameter budget (``DDP_PARAMS``, e.g. ``25M``), with one BatchNorm1d so that
DDP has buffers to broadcast (``broadcast_buffers``).

Step functions do one optimizer step on a pre-built batch; the data loader is kept
out of the timed step on purpose (it measures compute + communication, not I/O).
``manual_allreduce_step`` is the article's synchronous SGD: backward, then
``all_reduce`` of every gradient divided by the world size.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.distributed as dist
import torch.nn as nn

from suite.api import models


# The article's model and data and the MLP live in the shared workloads (suite/ops/models.py), so that other
# experiments train them too; they stay importable from here.
SourceSpec = models.SourceSpec
SOURCE = models.SOURCE
DEFAULT_DATA_SEED = models.DEFAULT_DATA_SEED
source_model = models.source_model
MLPSpec = models.MLPSpec
mlp_spec_for = models.mlp_spec_for
mlp = models.mlp
make_dataset = models.make_dataset


def random_batch(
    batch: int, in_features: int, classes: int, *, seed: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """One synthetic batch; callers pass a rank-dependent seed so ranks see different data."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, in_features, generator=g)
    y = torch.randint(0, classes, (batch,), generator=g)
    return x.to(device), y.to(device)


def grad_bytes(model: nn.Module) -> int:
    """Bytes of gradient one rank contributes to the all_reduce per step."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def state_bytes(model: nn.Module) -> int:
    """Bytes of parameters and buffers (what DDP broadcasts from rank 0 at construction)."""
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


def flat_params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def param_offset(model: nn.Module, param: torch.Tensor) -> int:
    """Where ``param`` starts in ``flat_params(model)``."""
    offset = 0
    for p in model.parameters():
        if p is param:
            return offset
        offset += p.numel()
    raise ValueError("not a parameter of the model")


# --- one optimizer step ---------------------------------------------------------------------------


def local_step(
    model: nn.Module, opt: torch.optim.Optimizer, loss_fn: nn.Module, x: torch.Tensor, y: torch.Tensor
) -> None:
    """zero_grad, forward, loss, backward, step: no communication (what DDP adds to)."""
    opt.zero_grad(set_to_none=False)
    loss_fn(model(x), y).backward()
    opt.step()


def allreduce_gradients(model: nn.Module, group=None) -> None:
    """The article's synchronous SGD: ``all_reduce`` every gradient, then divide by the world size."""
    n = dist.get_world_size(group)
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM, group=group)
            p.grad.div_(n)


def allreduce_gradients_coalesced(model: nn.Module, group=None, buffer: torch.Tensor | None = None) -> torch.Tensor:
    """One ``all_reduce`` of all gradients flattened into one buffer (what DDP's buckets do, one bucket)."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    n = dist.get_world_size(group)
    total = sum(g.numel() for g in grads)
    if buffer is None or buffer.numel() != total:
        buffer = torch.empty(total, dtype=grads[0].dtype, device=grads[0].device)
    off = 0
    for g in grads:
        buffer[off : off + g.numel()].copy_(g.reshape(-1))
        off += g.numel()
    dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=group)
    buffer.div_(n)
    off = 0
    for g in grads:
        g.copy_(buffer[off : off + g.numel()].view_as(g))
        off += g.numel()
    return buffer


def manual_allreduce_step(model, opt, loss_fn, x, y, group=None) -> None:
    opt.zero_grad(set_to_none=False)
    loss_fn(model(x), y).backward()
    allreduce_gradients(model, group)
    opt.step()


def sampler_batches(dataset, sampler, batch_size: int) -> Iterator[list[int]]:
    """The index batches a DataLoader(batch_size, sampler) yields, in order."""
    idx = list(iter(sampler))
    for i in range(0, len(idx), batch_size):
        yield idx[i : i + batch_size]


def train_ddp_epochs(
    ddp_model: nn.Module, dataset, sampler, *, batch_size: int, epochs: int, lr: float, device: torch.device
) -> None:
    """The article's loop: set_epoch, then zero_grad/forward/loss/backward/step per batch."""
    opt = torch.optim.SGD(ddp_model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            opt.zero_grad()
            loss_fn(ddp_model(data), target).backward()
            opt.step()


def train_single_process_equivalent(
    model: nn.Module, dataset, *, world_size: int, batch_per_rank: int, epochs: int, lr: float, seed: int = 0
) -> None:
    """One process reproducing DDP over ``world_size`` ranks: step k uses the union of every
    rank's k-th batch (batch ``world_size * batch_per_rank``) in one CrossEntropy mean.

    DDP averages the ranks' gradients; each rank's loss is a mean over an equally sized batch,
    so the average of the ranks' gradients is the gradient of the mean over the union.
    """
    from torch.utils.data.distributed import DistributedSampler

    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    samplers = [DistributedSampler(dataset, num_replicas=world_size, rank=r, seed=seed) for r in range(world_size)]
    for epoch in range(epochs):
        per_rank = []
        for s in samplers:
            s.set_epoch(epoch)
            per_rank.append(list(sampler_batches(dataset, s, batch_per_rank)))
        for k in range(len(per_rank[0])):
            idx = [i for r in range(world_size) for i in per_rank[r][k]]
            x, y = dataset[idx]
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()


def flat_params_from_state(state: dict) -> torch.Tensor:
    """Parameters of an ``nn.Linear`` state dict (weight, bias) flattened like ``flat_params``."""
    return torch.cat([state[k].reshape(-1) for k in ("weight", "bias")])


def tensor_bytes(obj) -> int:
    """Bytes of every tensor in ``obj``, through dicts, lists and tuples (a checkpoint: the net's state, the
    optimizer's, every rank's buffers, max|g| and max|p|)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0
