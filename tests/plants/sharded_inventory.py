"""Planted bug: every sharded training step also all-reduces a number from a helper thread (a loss logger
that synchronises its metric off the training thread, as logging and checkpoint helpers do).

CommDebugMode is a dispatch mode of the thread it was entered on, so the inventory does not see that op;
c10d's per-group sequence number counts it. Before the inventory was checked against c10d, the step's
recorded bytes, its theory check and its replay left the op out and the run passed
(tests/dist/test_sharded_dist.py requires it to fail, naming the group).
"""

import threading

import torch
import torch.distributed as dist

from experiments.sharded import workload

_stepper = workload.stepper


def _logs_from_a_thread(trainer, *args, **kwargs):
    step = _stepper(trainer, *args, **kwargs)

    def logged() -> None:
        step()
        metric = torch.zeros(1)
        logger = threading.Thread(target=dist.all_reduce, args=(metric,))
        logger.start()
        logger.join()

    return logged


workload.stepper = _logs_from_a_thread
