"""The source article's complete DistributedDataParallel example, made to run anywhere.

Line for line the article's ``train(rank, world_size)``: ``nn.Linear(1024, 10)``,
10,000 random samples, batch 32 per rank, SGD lr 0.01, CrossEntropyLoss,
``DistributedSampler`` with ``set_epoch`` every epoch, 5 epochs, the process group
created and destroyed around it. The changes, each needed to run it unchanged on
Gloo/CPU and NCCL/GPU and under both launchers:

- the backend follows the device (``nccl`` with CUDA, else ``gloo``), and
  ``.cuda(rank)`` becomes ``.to(device)``;
- the dataset is drawn from a seeded generator: the article's unseeded
  ``torch.randn`` gives every process a *different* dataset, while
  ``DistributedSampler`` assumes one dataset that every rank indexes alike;
- ``torch.multiprocessing.spawn`` needs MASTER_ADDR/MASTER_PORT, which the article
  leaves out; they are set when absent. Under torchrun (RANK in the environment)
  the script is one rank and does not spawn.

Run it:

    python -m torch.distributed.run --nproc-per-node 2 examples/ddp_source_example.py
    python examples/ddp_source_example.py --nprocs 2          # torch.multiprocessing.spawn

``--epochs/--samples`` shrink the run (tests); ``--out DIR`` saves every rank's final
parameters to ``DIR/rank<r>.pt`` so that they can be compared.

Teardown (``--teardown``): the article calls ``dist.destroy_process_group()`` while
``ddp_model`` is still alive (``as-is``, the default). DDP's reducer holds the process group,
so the Gloo group outlives that call; when the last all_reduce's work object is released by
a Gloo worker thread while the interpreter is already shutting down, that thread needs the
GIL to drop its Python reference, is made to exit, and the forced unwind through a C++
destructor calls ``std::terminate``: the process aborts ("terminate called without an active
exception", SIGABRT) after training completed. ``corrected`` drops the DDP model (and
collects it) before ``destroy_process_group``, so the group is destroyed while Python is
alive. Rates measured on this project's 2-core machine: see README, "DDP".
"""

import argparse
import datetime
import gc
import os
import socket

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def train(rank, world_size, epochs=5, n_samples=10000, out=None, teardown="as-is"):
    use_cuda = torch.cuda.is_available()
    backend = "nccl" if use_cuda else "gloo"
    device = torch.device("cuda", rank % torch.cuda.device_count()) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    # an explicit timeout: a lost peer ends the run in a minute, not the default 10-30
    dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=60))

    torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = nn.Linear(1024, 10).to(device)
    ddp_model = DDP(model, device_ids=[device.index] if use_cuda else None)

    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    g = torch.Generator().manual_seed(1234)
    dataset = torch.utils.data.TensorDataset(
        torch.randn(n_samples, 1024, generator=g), torch.randint(0, 10, (n_samples,), generator=g)
    )
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=world_size, rank=rank)
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, sampler=sampler)

    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a new shuffle every epoch, the same on every rank
        total, batches = 0.0, 0
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = ddp_model(data)
            loss = loss_fn(output, target)
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
        if rank == 0:
            mean = total / max(batches, 1)
            print(f"epoch {epoch}: mean loss {mean:z.4f} over {batches} batches per rank", flush=True)

    if out:
        os.makedirs(out, exist_ok=True)
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, os.path.join(out, f"rank{rank}.pt"))
    if teardown == "corrected":  # not in the article: release DDP (it holds the group) first
        del ddp_model, optimizer
        gc.collect()
    dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--nprocs",
        type=int,
        default=None,
        help="processes to spawn (default: one per GPU, or 2 on CPU); ignored under torchrun",
    )
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--out", default=None, help="save each rank's final parameters here")
    ap.add_argument(
        "--teardown",
        choices=("as-is", "corrected"),
        default="as-is",
        help="as-is: the article's order; corrected: release DDP before destroy_process_group",
    )
    a = ap.parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun: this process is one rank
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a.epochs, a.samples, a.out, a.teardown)
    else:
        world_size = a.nprocs or (torch.cuda.device_count() or 2)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        torch.multiprocessing.spawn(train, args=(world_size, a.epochs, a.samples, a.out, a.teardown), nprocs=world_size)
