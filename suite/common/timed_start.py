"""When a rank began its first timed samples (a training case's first timed step), as a file the injector reads.

The harness's phases (suite/harness/phases.py) create ``<run>/hang/rank<r>.timed`` when the rank first enters its
``timed`` phase, once per session; the injector's controllers (suite/inject/controller.py, host.py) count a plan's
onset from when it appears, so that an onset means seconds into the timed steps however long the ranks' start
took on a loaded host. Pure Python, no torch: both sides use it.
"""

from __future__ import annotations

import os
from pathlib import Path


def path(run_dir: str | os.PathLike, rank: int) -> Path:
    return Path(run_dir) / "hang" / f"rank{rank}.timed"


def mark(run_dir: str | os.PathLike | None, rank: int) -> None:
    """Create the rank's file where it is not there yet (best effort, never raises; nothing without a run)."""
    if not run_dir:
        return
    p = path(run_dir, rank)
    if p.exists():
        return
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.touch()
    except OSError:
        pass
