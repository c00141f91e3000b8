"""Planted bugs: two ops a sharded training step issues outside what CommDebugMode sees.

- ddp: every step ends with a ``dist.barrier()`` (a step that waits for the slowest rank before logging, as
  training loops do): CommDebugMode lists no barrier;
- every other strategy: the step also all-reduces a number from a helper thread (a loss logger that
  synchronises its metric off the training thread, as logging and checkpoint helpers do): CommDebugMode is a
  dispatch mode of the thread it was entered on.

c10d's per-group sequence number counts both. Before the inventory was checked against c10d, the step's
recorded bytes, its theory check and its replay left the op out and the run passed
(tests/dist/test_sharded_dist.py requires both to fail, naming the group).
"""

import threading

import torch
import torch.distributed as dist

from experiments.sharded import workload

_stepper = workload.stepper


def _unseen_op(trainer, *args, **kwargs):
    step = _stepper(trainer, *args, **kwargs)

    def with_a_barrier() -> None:
        step()
        dist.barrier()

    def logged() -> None:
        step()
        metric = torch.zeros(1)
        logger = threading.Thread(target=dist.all_reduce, args=(metric,))
        logger.start()
        logger.join()

    return with_a_barrier if trainer.strategy == "ddp" else logged


workload.stepper = _unseen_op
