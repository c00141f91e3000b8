"""How much CPU a host's ranks have and how busy the host is: whether its ranks (and their intra-op threads)
outnumber its usable cores (oversubscription), and its load average through the run. The launcher says so
before the ranks start, the ranks record it in machine_info, and the report reads it back (suite/report/
summary.py): the numbers it distorts are named once, here. Torch-free."""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Iterable

OVERSUBSCRIBED_RANKS = (
    "ranks wait for a core, so every time includes that wait: small-message latency (the fits' alpha), bus "
    "bandwidth (Gloo reduces and copies on the CPU), and DDP's scaling efficiency and compute/communication "
    "split (its solo step has a core to itself, its no-communication step shares them) measure CPU "
    "contention, not communication"
)
"""What a run with more ranks than usable cores on a host measures (every rank spins through its own
compute and copies; a rank waiting for a core stalls its peers inside the collective)."""

OVERSUBSCRIBED_THREADS = (
    "the intra-op threads of the ranks' compute contend for the cores: step times of the model experiments "
    "(ddp, sharded, model_parallel) and their scaling efficiency include that contention; collectives "
    "alone less so (OMP_NUM_THREADS=1 avoids it)"
)
"""What a run whose ranks fit the cores but whose ranks x intra-op threads do not measures."""


def cpu_list(cpus: Iterable[int]) -> str:
    """CPU ids in the kernel's list format (``0-3,8``, as ``Cpus_allowed_list`` and ``taskset -c`` write them)."""
    ids = sorted(set(cpus))
    parts, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


def parse_cpu_list(text: str) -> set[int]:
    """The CPU ids of a kernel-format list (``0-3,8``); the inverse of ``cpu_list``."""
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def allowed_cpus() -> set[int] | None:
    """The CPUs this process may run on (its affinity: ``taskset``, cpusets), None where the OS cannot tell."""
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def load_average() -> list[float] | None:
    """The host's 1, 5 and 15 minute load averages (runnable and uninterruptible tasks), None where the
    OS has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def usable_cpus(n_allowed: int | None, cgroup_cpus: float | None) -> float | None:
    """The cores a host's ranks can use at once: the CPUs their affinity allows, bounded by a cgroup CPU
    quota (a container's ``--cpus``); None when neither is known."""
    known = [x for x in (n_allowed, cgroup_cpus) if x]
    return min(known) if known else None


def cpu_share(ranks: int, threads_per_rank: int | None, usable: float | None) -> dict:
    """A host's ranks against its cores: ``oversubscribed`` is ``"ranks"`` when the ranks alone outnumber the
    usable cores, ``"threads"`` when only ranks x intra-op threads do, None when they fit (or the cores are
    unknown)."""
    over = None
    if usable:
        if ranks > usable:
            over = "ranks"
        elif threads_per_rank and ranks * threads_per_rank > usable:
            over = "threads"
    return {"ranks": ranks, "threads_per_rank": threads_per_rank, "usable_cpus": usable, "oversubscribed": over}


def describe_share(share: dict, where: str = "") -> str | None:
    """One line for a host whose ranks outnumber its cores (None when they fit): what was run on what, and
    which numbers it distorts. ``where``: the host, as the line names it (`` on host x``)."""
    over = share.get("oversubscribed")
    if not over:
        return None
    on = cores(share["usable_cpus"], "usable ") + where
    if over == "ranks":
        fits = max(1, int(share["usable_cpus"]))
        avoid = f"NPROC={fits}{' or fewer' if fits > 1 else ''} avoids it"
        return f"{share['ranks']} ranks on {on}: {OVERSUBSCRIBED_RANKS} ({avoid})"
    return f"{share['ranks']} ranks x {share['threads_per_rank']} intra-op threads on {on}: {OVERSUBSCRIBED_THREADS}"


MAX_DEFAULT_WORLD = 4
"""The most ranks the default world starts on one host (one per usable core up to this)."""


def default_world(usable: float | None, need: int = 2) -> tuple[int, str]:
    """The ranks a one-host run starts when NPROC is not given, and why: one per usable core (whole cores of a
    cgroup quota), at most MAX_DEFAULT_WORLD; at least ``need``, the fewest the experiments run on, which on
    fewer cores is oversubscribed. Cores unknown: MAX_DEFAULT_WORLD (or ``need``)."""
    if not usable:
        return max(need, MAX_DEFAULT_WORLD), "the usable cores are unknown"
    whole = int(usable)
    n = max(1, min(whole, MAX_DEFAULT_WORLD))
    if n >= need:
        most = f", at most {MAX_DEFAULT_WORLD}," if whole > MAX_DEFAULT_WORLD else ""
        return n, f"one per usable core{most} of {usable:z.3g}"
    over = "oversubscribed: " if need > usable else ""
    return need, f"{over}{cores(usable, 'usable ')}, and the experiments need at least {need} ranks"


def threads_from_env(env: dict) -> int | None:
    """The intra-op threads a rank will start with: OMP_NUM_THREADS (torch follows it; the launcher sets 1
    unless the user chose), None when unset or not a positive integer (torch then picks)."""
    try:
        n = int(env.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n > 0 else None


def launch_share(nproc: int, env: dict, cgroup_cpus: float | None) -> dict:
    """``cpu_share`` of the ``nproc`` ranks the launcher is about to start on this host (they inherit its
    affinity and ``env``)."""
    allowed = allowed_cpus()
    return cpu_share(nproc, threads_from_env(env), usable_cpus(len(allowed) if allowed else None, cgroup_cpus))


def load_contention(load_1min: float | None, host_cpus: int | None, share: dict) -> str | None:
    """Why a host's medians may wander, from its peak 1-minute load average, None when nothing says so. The
    load average counts the runnable tasks of the whole host (in a container too), so it is weighed against
    the host's CPUs: other processes competed when it exceeds them by more than this run's ranks can add
    (one runnable task per intra-op thread each; a rank blocked waiting for a peer adds none). Else the run's
    own ranks, where they outnumber their usable cores."""
    own = share.get("ranks", 0) * (share.get("threads_per_rank") or 1)
    if load_1min is not None and host_cpus and load_1min > host_cpus and load_1min - own >= 0.5:
        return (
            f"load average {load_1min:z.1f} on the host's {cores(host_cpus)} during the run, at most {own} of it "
            "this run's ranks: other processes competed for the CPU"
        )
    if share.get("oversubscribed"):
        return f"this run's {share['ranks']} ranks share {cores(share['usable_cpus'], 'usable ')} (CPU oversubscribed)"
    return None


def cores(n: float, what: str = "") -> str:
    """``2 cores``, ``1 usable core``, ``1.5 cores`` (a cgroup quota)."""
    return f"{n:z.3g} {what}core{'' if n == 1 else 's'}"


def peak_load(*loads: list[float] | None) -> float | None:
    """The highest 1-minute load average of the samples given (None when there is none)."""
    ones = [x[0] for x in loads if x and not math.isnan(x[0])]
    return max(ones) if ones else None


def track_load(so_far: dict | None, now: list[float] | None) -> dict:
    """The load average of a host sampled through the run (rank 0's, after every case): the peak 1-minute
    value, the last sample (the end of the run once the session has ended) and how many were taken."""
    out = dict(so_far or {"peak_1min": None, "end": None, "samples": 0})
    if now:
        out["peak_1min"] = now[0] if out["peak_1min"] is None else max(out["peak_1min"], now[0])
        out["end"], out["samples"] = now, out["samples"] + 1
    return out


def cpu_counters() -> tuple[float, float, float, float]:
    """(this kernel's id, its busy CPU s, its total CPU s, this process's CPU s), every core's and all its threads'.
    The id is the kernel's boot id as a float64 (48 bits: exact), the same for every process whose counters these
    are (containers share their host's kernel); steal counts as busy. What the fail-slow watch subtracts its ranks
    from (suite/watch/foreign.py): about 40 µs."""
    import psutil  # here: the launcher's and the report's imports of this module need none of it

    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            text = f.read().strip()
    except OSError:
        text = os.uname().nodename
    kernel = float(zlib.crc32(text.encode()) << 16 | (zlib.adler32(text.encode()) & 0xFFFF))
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    total = sum(getattr(t, k, 0.0) for k in ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"))
    own = os.times()  # this process, all its threads
    return kernel, total - idle, total, own.user + own.system
