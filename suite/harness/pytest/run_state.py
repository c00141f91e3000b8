"""The pytest plugin's state for one session on this rank (``RunState`` in ``config.stash[RUN]``), and the
rank the plugin takes this process to be."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

import pytest

from suite.common import progress
from suite.harness.phases import Phases
from suite.common.config import BenchConfig

if TYPE_CHECKING:  # torch: imported when the session starts its group
    from suite.harness.dist import EndOfRun


@dataclass(kw_only=True)
class RunState:
    """All the plugin keeps for one pytest session (this rank), in ``config.stash[RUN]``: made by
    pytest_configure, absent when that failed (every hook then does nothing)."""

    cfg: BenchConfig
    rank: int
    started_unix: float = field(default_factory=time.time)
    phases: Phases = field(default_factory=Phases)
    """Where this rank's time goes (suite.phase_seconds)."""
    progress_mode: str = "off"
    """live, plain or off (suite/common/progress.py); off on every rank but 0."""
    progress_every_s: float = 30.0
    total: int = 0
    """Cases collected; ``done`` of them have ended."""
    done: int = 0
    progress_t0: float = 0.0
    progress_last: float = 0.0
    """When the last plain progress line was printed."""
    tty: TextIO | None = None
    """The live line's own handle on the terminal (pytest's capture holds fd 1 while a test runs)."""
    live: progress.LiveLine | None = None
    saved_tw: object = None
    """pytest's terminal writer while the live line has its place."""
    devnull: TextIO | None = None
    """Where a quiet rank's terminal reporter writes."""
    records: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    """Cases that failed alike on every rank (the harness's CaseFailed), each with its message."""
    machine: dict | None = None
    """The run's hosts and group (sysinfo.collect_global), once the group is up."""
    machine_info: dict | None = None
    commit_info: dict | None = None
    """pytest-benchmark's machine and commit info, generated once (about 0.2 s each)."""
    encoded: dict = field(default_factory=dict)
    """id(benchmark) -> (benchmark, its JSON text): each stored entry encoded once."""
    n_tests: int = -1
    """Tests begun so far, less one (SUITE_INJECT_FAULT's n counts from 0)."""
    end: EndOfRun | None = None
    """suite.harness.dist.EndOfRun, from the session's end: no rank leaves before rank 0 has written."""
    ran_to_the_end: bool = False
    """Every case of this rank ran (none stopped the session): it may wait for rank 0 at its exit."""


RUN = pytest.StashKey[RunState]()


def state(config) -> RunState | None:
    return config.stash.get(RUN, None)


def rank_from_env() -> int:
    """This process's rank as init_distributed reads it (``read_launch_env``); 0 where the launcher's
    variables are malformed (the session's init_distributed reports that)."""
    from suite.harness.dist import read_launch_env
    from suite.common.backends import PreflightError

    try:
        return read_launch_env().rank
    except PreflightError:
        return 0
