"""A memory-bandwidth hog: processes that copy a buffer much larger than the caches over and over, on the cores
the rank does not use where there are any (so that they compete for memory, not for its cores)."""

from __future__ import annotations

import os

from ..effects import Hogs
from ..kind import InjectionClass, Target

BUFFER_BYTES = 64 * 2**20
"""Each hog's buffer: larger than any last-level cache, so every copy goes to memory."""


def start(target: Target, severity: float) -> Hogs:
    every = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
    return Hogs(int(severity), (every - target.cores) or every, BUFFER_BYTES)


CLASS = InjectionClass(
    name="membw",
    order=4,
    summary=f"<severity> processes copying {BUFFER_BYTES // 2**20} MiB buffers, off the rank's cores where it can",
    severity="hog processes",
    limits=(1, 8),
    drawn=(1, 2),
    integer=True,
    start=start,
)
