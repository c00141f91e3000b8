"""A rank's CPU cut to ``severity`` CPUs: a CFS quota of ``severity`` x the period on a cgroup of its own, where a
cpu cgroup is writable (cgroup v1's ``cpu`` hierarchy, or v2 with the ``cpu`` controller), else its threads pinned
to as many of its cores as ``severity`` rounds down to (at least one, the lowest: the one the other ranks share).

The quota is what a node's CPU quota cut is (a container's ``--cpus`` is the same CFS quota on its cgroup); the
pinning, needing no privilege, is coarser: whole cores, shared with whatever else runs there. ``how`` says which
the effect used (the controller writes it to the truth). ``stop`` moves the rank back to its own cgroup and removes
the new one, or gives its threads their cores back.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from suite.system import cgroup

from ..kind import InjectionClass, Target

PERIOD_US = 100_000
"""The CFS period: the quota is ``severity`` x this much CPU time per period."""


class Quota:
    """``pid`` moved into a new cgroup beside its own with a CFS quota of ``cpus``; ValueError where none can be
    made (no writable cpu hierarchy)."""

    how = "cgroup"

    def __init__(self, pid: int, cpus: float) -> None:
        self.pid, quota = pid, max(1000, round(cpus * PERIOD_US))
        for root in cgroup.CPU_ROOTS:
            home = cgroup.cgroup_of(pid, root) if root.is_dir() else None
            if home is None or not home.is_dir():
                continue
            mine = home / f"suite-inject-{pid}"
            try:
                mine.mkdir(exist_ok=True)
                if (mine / "cpu.max").exists():  # v2
                    (mine / "cpu.max").write_text(f"{quota} {PERIOD_US}")
                else:
                    (mine / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                    (mine / "cpu.cfs_quota_us").write_text(str(quota))
                (mine / "cgroup.procs").write_text(str(pid))  # all of its threads
            except OSError:
                self._remove(mine)
                continue
            self.home, self.mine = home, mine
            return
        raise ValueError("no writable cpu cgroup")

    @staticmethod
    def _remove(folder: Path) -> None:
        try:
            folder.rmdir()
        except OSError:
            pass

    def stop(self) -> None:
        """Every process in the new cgroup back to the rank's own (the rank, and any child it started meanwhile,
        which inherited the cgroup), then the new one removed."""
        for _ in range(3):  # a process may start while the others move
            try:
                pids = (self.mine / "cgroup.procs").read_text().split()
            except OSError:
                return  # gone already
            for pid in pids:
                try:
                    (self.home / "cgroup.procs").write_text(pid)
                except OSError:
                    pass  # ended meanwhile
            if not pids:
                break
        self._remove(self.mine)


class Pinned:
    """Every thread of ``pid`` pinned to ``cores`` (its own cores given back on ``stop``; threads started meanwhile
    inherit the pinning from the thread that started them and are given them back too)."""

    how = "affinity"

    def __init__(self, pid: int, cores: frozenset[int], keep: int) -> None:
        self.pid, self.cores = pid, cores
        self._set(frozenset(sorted(cores)[: max(1, keep)]))

    def _set(self, cores: frozenset[int]) -> None:
        for tid in cgroup.threads(self.pid):
            try:
                os.sched_setaffinity(tid, cores)
            except OSError:
                continue  # a thread that ended meanwhile

    def stop(self) -> None:
        self._set(self.cores)


def start(target: Target, severity: float) -> Quota | Pinned:
    try:
        return Quota(target.pid, severity)
    except ValueError:
        cores = target.cores or frozenset(os.sched_getaffinity(0))
        return Pinned(target.pid, cores, math.floor(severity))


CLASS = InjectionClass(
    name="cpu",
    order=5,
    summary="the rank's CPU cut to <severity> CPUs: a cgroup's CFS quota, else its threads pinned to fewer cores",
    severity="CPUs left to the rank",
    limits=(0.05, 64.0),
    drawn=(0.2, 0.6),
    start=start,
)
