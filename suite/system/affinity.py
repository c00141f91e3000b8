"""Pin every thread of this process to one CPU and put the masks back (Linux
``sched_setaffinity`` per thread id, from ``/proc/self/task``)."""

from __future__ import annotations

import os
from dataclasses import dataclass


def _thread_ids() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


@dataclass(frozen=True)
class SavedAffinity:
    masks: dict
    """thread id -> CPU mask before pinning (empty: nothing was pinned)."""
    default_mask: frozenset
    """The process's mask, for threads started while pinned."""


def pin_process(cpu: int) -> SavedAffinity:
    """Pin every thread of this process (Gloo's workers included) to ``cpu``."""
    masks, default = {}, frozenset(os.sched_getaffinity(0))
    for tid in _thread_ids():
        try:
            masks[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {cpu})
        except OSError:  # a thread that exited meanwhile
            pass
    return SavedAffinity(masks=masks, default_mask=default)


def restore(saved: SavedAffinity) -> None:
    if saved.masks:
        for tid in _thread_ids():  # threads started while pinned get the process's old mask
            try:
                os.sched_setaffinity(tid, saved.masks.get(tid, saved.default_mask))
            except OSError:
                pass
