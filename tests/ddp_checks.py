"""Multi-rank verification of DDP training, run under torchrun by tests/dist/test_ddp_dist.py.

    python -m torch.distributed.run --standalone --nproc-per-node N -m tests.ddp_checks --out DIR

Every rank writes ``DIR/rank<r>.json``: one entry per check with ``ok`` and the numbers
behind it, so the test names the check that failed. Checks (source model, reduced run:
``--samples`` samples, ``--epochs`` epochs, batch 32 per rank, SGD lr 0.01):

- ddp_params_identical: after training, every rank's parameters equal rank 0's exactly.
- ddp_matches_single_process: DDP with N ranks x batch b equals one process training with
  batch N·b over the same sample order (max |Δ| <= ``EQUIV_ATOL``).
- sampler_*: DistributedSampler shards are disjoint and cover the dataset; ``set_epoch``
  changes the order; the order for an epoch is the same on every rank.
- manual_matches_ddp: the article's manual all_reduce SGD reaches DDP's parameters.
- model_parallel_*: the scattered/all-gathered (and gathered) split layer equals the unsplit one exactly.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler

from experiments.ddp import models as training
from experiments.model_parallel import workload as mp_workload
from experiments.model_parallel import settings as mp_settings
from suite.common.config import build_config
from suite.harness.dist import destroy_distributed, init_distributed

# float32 SGD on a linear layer: the two computations sum the same gradients in a different
# order (DDP divides each rank's bucket by N before the all_reduce; the single process takes
# one mean over N·b samples), so they differ by rounding only. Observed max |Δ| is ~1e-8..1e-7
# after 2 epochs; 1e-5 is far above rounding and far below one SGD step's change (~1e-3).
EQUIV_ATOL = 1e-5
MANUAL_ATOL = 1e-6


def _all_same(ctx, t: torch.Tensor) -> float:
    """Max |this rank − rank 0| over all ranks."""
    ref = t.clone()
    dist.broadcast(ref, src=0, group=ctx.group)
    d = torch.tensor([(t - ref).abs().max().item()], dtype=torch.float64)
    dist.all_reduce(d, op=dist.ReduceOp.MAX, group=ctx.group)
    return d.item()


def run_checks(ctx, samples: int, epochs: int) -> dict:
    n, r = ctx.world_size, ctx.rank
    b, lr = training.SOURCE.batch_per_rank, training.SOURCE.lr
    out: dict = {"world_size": n}
    dataset = training.make_dataset(samples)

    # DDP as in the article
    model = training.source_model(seed=0)
    ddp = DDP(model, process_group=ctx.group)
    sampler = DistributedSampler(dataset, num_replicas=n, rank=r)
    training.train_ddp_epochs(ddp, dataset, sampler, batch_size=b, epochs=epochs, lr=lr, device=ctx.device)
    p_ddp = training.flat_params(model)
    diff = _all_same(ctx, p_ddp)
    out["ddp_params_identical"] = {"ok": diff == 0.0, "max_abs_diff": diff}

    single = training.source_model(seed=0)
    training.train_single_process_equivalent(single, dataset, world_size=n, batch_per_rank=b, epochs=epochs, lr=lr)
    d = (training.flat_params(single) - p_ddp).abs().max().item()
    moved = (training.flat_params(single) - training.flat_params(training.source_model(seed=0))).abs().max().item()
    out["ddp_matches_single_process"] = {
        "ok": d <= EQUIV_ATOL and moved > 100 * EQUIV_ATOL,
        "max_abs_diff": d,
        "atol": EQUIV_ATOL,
        "max_param_change": moved,
    }

    # DistributedSampler: shards disjoint + covering, set_epoch reshuffles, same order everywhere
    for epoch in (0, 1):
        s = DistributedSampler(dataset, num_replicas=n, rank=r)
        s.set_epoch(epoch)
        shards: list = [None] * n
        dist.all_gather_object(shards, list(iter(s)), group=ctx.group)
        flat = [i for sh in shards for i in sh]
        out[f"sampler_disjoint_cover_epoch{epoch}"] = {
            "ok": len(flat) == len(set(flat)) == len(dataset) and set(flat) == set(range(len(dataset))),
            "n_indices": len(flat),
            "n_unique": len(set(flat)),
        }
        view0 = DistributedSampler(dataset, num_replicas=n, rank=0)
        view0.set_epoch(epoch)
        views: list = [None] * n
        dist.all_gather_object(views, list(iter(view0)), group=ctx.group)
        out[f"sampler_same_order_on_every_rank_epoch{epoch}"] = {"ok": all(v == views[0] for v in views)}
    s0, s1 = DistributedSampler(dataset, num_replicas=n, rank=r), DistributedSampler(dataset, num_replicas=n, rank=r)
    s1.set_epoch(1)
    out["sampler_set_epoch_changes_order"] = {"ok": list(iter(s0)) != list(iter(s1))}

    # manual all_reduce SGD (the article's description) against DDP, same data order
    manual = training.source_model(seed=0)
    opt = torch.optim.SGD(manual.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    ms = DistributedSampler(dataset, num_replicas=n, rank=r)
    for epoch in range(epochs):
        ms.set_epoch(epoch)
        for idx in training.sampler_batches(dataset, ms, b):
            x, y = dataset[idx]
            training.manual_allreduce_step(manual, opt, loss_fn, x, y, ctx.group)
    p_man = training.flat_params(manual)
    d = (p_man - p_ddp).abs().max().item()
    out["manual_matches_ddp"] = {
        "ok": d <= MANUAL_ATOL and _all_same(ctx, p_man) == 0.0,
        "max_abs_diff": d,
        "atol": MANUAL_ATOL,
    }

    # model parallelism: split layer == unsplit layer, exactly (integer-valued data)
    layer = mp_settings.ModelParallelSettings(in_features=512, out_features=64 * n, batch=8)
    c = mp_workload._rows(layer, ctx)
    w = mp_workload._ints((layer.out_features, layer.in_features), 1, ctx.device)
    x = mp_workload._ints((layer.batch, layer.in_features), 2, ctx.device)
    w_local = mp_workload._scatter_weight(w if r == 0 else None, layer, ctx)
    out["model_parallel_scatter"] = {"ok": torch.equal(w_local, w[r * c : (r + 1) * c])}
    y = mp_workload._combine(x @ w_local.t(), ctx, "all_gather")
    out["model_parallel_all_gather_equals_unsplit"] = {"ok": torch.equal(y, x @ w.t())}
    yg = mp_workload._combine(x @ w_local.t(), ctx, "gather")
    out["model_parallel_gather_equals_unsplit"] = {"ok": torch.equal(yg, x @ w.t()) if r == 0 else yg is None}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    ctx = init_distributed(build_config(backend="gloo", device="cpu", timeout_s=60))
    res = run_checks(ctx, a.samples, a.epochs)
    destroy_distributed(ctx)  # after run_checks returned: its DDP modules (which hold the group) are gone
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"rank{os.environ.get('RANK', '0')}.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
