"""Planted bugs: two ops a sharded training step issues outside what its inventory sees.

- ddp: every step ends with a ``dist.barrier()`` (a step that waits for the slowest rank before logging, as
  training loops do): CommDebugMode lists no barrier;
- every other strategy, pipelines included: the step also all-reduces a number from a helper thread (a loss
  logger that synchronises its metric off the training thread, as logging and checkpoint helpers do):
  CommDebugMode, and the pipelines' P2PInventory, are dispatch modes of the thread they were entered on.

c10d's per-group sequence number counts both. Before the inventory was checked against c10d, the step's
recorded bytes, its theory check and its replay left the op out and the run passed
(tests/dist/test_sharded_dist.py requires each to fail, naming the group).
"""

import threading

import torch
import torch.distributed as dist

from experiments.sharded import pipeline_train, workload

_stepper = workload.stepper
_pipeline = pipeline_train.make_trainer


def _logged_off_thread(step, group=None):
    def logged() -> None:
        step()
        metric = torch.zeros(1)
        logger = threading.Thread(target=dist.all_reduce, args=(metric,), kwargs={"group": group})
        logger.start()
        logger.join()

    return logged


def _unseen_op(trainer, *args, **kwargs):
    step = _stepper(trainer, *args, **kwargs)

    def with_a_barrier() -> None:
        step()
        dist.barrier()

    return with_a_barrier if trainer.strategy == "ddp" else _logged_off_thread(step)


def _pipeline_with_an_unseen_op(strategy, ctx, *args, **kwargs):
    trainer = _pipeline(strategy, ctx, *args, **kwargs)
    trainer.step = _logged_off_thread(trainer.step, ctx.group)
    return trainer


workload.stepper = _unseen_op
pipeline_train.make_trainer = _pipeline_with_an_unseen_op
