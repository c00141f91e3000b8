"""A noisy neighbour: busy processes pinned to the cores the rank may run on, competing with it for them."""

from __future__ import annotations

from ..effects import Hogs
from ..kind import InjectionClass, Target


def start(target: Target, severity: float) -> Hogs:
    return Hogs(int(severity), target.cores)


CLASS = InjectionClass(
    name="noisy",
    order=3,
    summary="<severity> spinning processes pinned to the rank's cores",
    severity="busy processes",
    limits=(1, 16),
    drawn=(1, 4),
    integer=True,
    start=start,
)
