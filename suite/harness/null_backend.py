"""A process group whose ops complete at once: the yardstick for what the suite adds to an op, free of any network.

Registered with c10d as ``null`` (as the MPI group is, suite/harness/mpi/group.py), for one rank on CPU: every
op is already complete when it returns (one shared Work whose ``wait`` returns at once) and leaves its result as
a one-rank group must (an all_reduce, a broadcast or a barrier change nothing; an all_gather copies the input to
its output), so the suite's checks hold on it. It counts its ops as c10d's sequence number, which the journal reads
(suite/harness/journal/). A group of more ranks is refused: it would move no data between them.

``scripts/suite_cost.py`` (``make suite-cost``) times the suite's timing path and a bare loop on it, in one
process: what remains of an op there is c10d's dispatch and Python's call, so the difference is the suite's own.
No user picks it (``BACKEND`` does not list it).
"""

from __future__ import annotations

import datetime

import torch.distributed as dist

NAME = "null"
"""The name it is registered with c10d under."""


class NullWork(dist.Work):
    """A Work that is complete from the start."""

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True


class NullGroup(dist.ProcessGroup):
    """c10d's creator of the backend and the process group itself (one rank)."""

    def __init__(self, store, rank, size, timeout):
        if size != 1:
            raise ValueError(f"the null backend runs one rank (it moves no data between ranks); got {size}")
        super().__init__(rank, size)
        self._seq = 0
        self._done = NullWork()

    def getBackendName(self):
        return NAME

    def _get_sequence_number_for_group(self):
        return self._seq

    def _complete(self) -> NullWork:
        self._seq += 1
        return self._done

    def allreduce(self, tensors, opts):
        return self._complete()

    def broadcast(self, tensors, opts):
        return self._complete()

    def reduce(self, tensors, opts):
        return self._complete()

    def barrier(self, opts):
        return self._complete()

    def allgather(self, output_lists, inputs, opts):
        for outs, t in zip(output_lists, inputs):
            outs[0].copy_(t)
        return self._complete()

    def all_gather_single(self, output, input, opts):
        output.copy_(input)
        return self._complete()


def register() -> str:
    """Register the backend with c10d (once per process); its name."""
    if not hasattr(dist.Backend, NAME.upper()):  # register_backend names it there
        dist.Backend.register_backend(NAME, NullGroup, devices=["cpu"])
    return NAME


def start(timeout_s: float = 60.0) -> None:
    """This process's default group on the null backend: one rank, a store of its own."""
    store = dist.HashStore()
    timeout = datetime.timedelta(seconds=timeout_s)
    dist.init_process_group(register(), store=store, rank=0, world_size=1, timeout=timeout)
