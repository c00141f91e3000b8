"""A process's cpu cgroup and its threads, as the fail-slow injector's cpu class needs them
(suite/inject/classes/cpu.py): where the cpu hierarchies may be mounted, the folder of a process's cgroup in one,
and the ids of a process's threads; and whether its main thread sleeps in a wait, as its pause class needs
(suite/inject/effects.py)."""

from __future__ import annotations

import os
from pathlib import Path

CPU_ROOTS = (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct"), Path("/sys/fs/cgroup"))
"""Where a cpu cgroup hierarchy is mounted: v1's (either name), or v2's unified one."""


def cgroup_of(pid: int, root: Path) -> Path | None:
    """The folder of ``pid``'s cgroup under ``root`` (v1: the line naming ``cpu``; v2: the ``0::`` line)."""
    v2 = (root / "cgroup.controllers").is_file()
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        num, controllers, where = line.split(":", 2)
        if (v2 and num == "0") or (not v2 and "cpu" in controllers.split(",")):
            return root / where.lstrip("/")
    return None


def threads(pid: int) -> list[int]:
    """The ids of ``pid``'s threads (none where it has ended)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def asleep(pid: int) -> bool:
    """Whether ``pid``'s main thread sleeps in a wait (Linux's state ``S`` or ``D``), not running or ready to run
    (``R``); False where it is gone or its state cannot be read."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    end = stat.rfind(b")")  # the state follows the name, which may hold anything: "pid (name) S ..."
    return stat[end + 2 : end + 3] in (b"S", b"D")
