"""A step's compute where ranks outnumber cores: priced from a probe run on all ranks at once, not
extrapolated from fewer ranks.

A step model extrapolates compute from the world sizes it measured (per-rank work, a + b/N). That holds while
every rank has a core of its own. Where the N ranks share fewer cores (the compose simulation, whose N
containers share one machine's, or any oversubscribed host), each rank's compute waits for a core as long as
the others compute at the same time, and how long depends on N, the cores and whatever else the machine runs:
nothing measured at fewer ranks tells it. There the model takes the probe instead: the step's compute measured on
all N ranks at once (every rank computing at the same time, as in the step), recorded as measured beside the
compute it prices, whose model (``PROBE_MODEL``) says what the probe was.

Which probe: the compute the step itself did (``IN_STEP``), the step's median less its collectives replayed
alone, where nothing overlaps (CPU: every collective blocks the step). A separate run of the compute alone
(``ALONE``: the sharded step on process groups that move nothing) does the same work (for tp and sp its CPU
time per step is the real step's within 7%) but waits for a core at other times than the step did: on shared
cores its wall time came out up to 2.2 times the whole step's (fsdp2 on 3 compose nodes), so it prices a
contention the step did not see. It stays the probe only where there is no replay or the collectives may
overlap the compute.
"""

from __future__ import annotations

from suite.model.runs import run_topology

PROBE_MODEL = "the probe at {n} ranks: {what}, measured on all {n} ranks at once ({why})"
"""The priced compute's model where the ranks outnumber the cores and a probe at N exists."""
IN_STEP = "the step minus its collectives replayed alone (on CPU nothing overlaps)"
"""The probe that is the step's own compute (``in_step``)."""
ALONE = "the step's compute alone"
"""The probe measured apart from the step (the sharded step on groups that move nothing)."""
NO_PROBE = "; {ranks} ranks share {cores} but no probe ran at {n} ranks: the contention is not priced"
"""Appended to the extrapolation's name where the ranks outnumber the cores and no probe at N exists."""


def run_cores(run: dict, one_machine: bool) -> tuple[int, float | None]:
    """(the most ranks that share cores, those cores) of a stored run: with ``one_machine`` (its hosts are
    containers of one machine, as the compose simulation's) all its ranks on the most usable cores a host
    saw; else the host whose ranks outnumber its usable cores the most (machine_info's ``cpu_share``)."""
    hosts = list((((run.get("machine_info") or {}).get("suite") or {}).get("hosts") or {}).values())
    shares = [h.get("cpu_share") or {} for h in hosts]
    usable = [s["usable_cpus"] for s in shares if s.get("usable_cpus")]
    if one_machine:
        return run_topology(run).ranks, (max(usable) if usable else None)
    known = [(s["ranks"], s["usable_cpus"]) for s in shares if s.get("usable_cpus") and s.get("ranks")]
    if not known:
        return run_topology(run).ranks_per_node, None
    return max(known, key=lambda rc: rc[0] / rc[1])


def outnumbered(sharing: tuple[int, float | None]) -> bool:
    """Whether the ranks of ``sharing`` (ranks, cores: run_cores) outnumber its cores (unknown cores: no)."""
    ranks, cores = sharing
    return bool(cores) and ranks > cores


def in_step(step_us: float, replay_us: float) -> float:
    """The compute a step whose collectives never overlap it did (``IN_STEP``): its time less its collectives'
    replayed alone, never below 0 (medians of two measurements)."""
    return max(step_us - replay_us, 0.0)


def cores_text(cores: float) -> str:
    return f"{cores:zg} core{'' if cores == 1 else 's'}"


def priced(
    extrapolated_us: float,
    how: str,
    n: int,
    sharing: tuple[int, float | None],
    probe_us: float | None,
    what: str = ALONE,
) -> tuple[float, str, float | None]:
    """(compute µs, its model, the probe it took or None) of a step at ``n`` ranks whose ``sharing`` (run_cores)
    says how many of them share how many cores: the probe at ``n`` (µs, measured on all of them at once; None
    where none ran) where they outnumber the cores, else the extrapolation (``extrapolated_us``, named ``how``),
    which names the contention it leaves out where there is no probe. ``what``: the probe's kind (IN_STEP, ALONE)."""
    if not outnumbered(sharing):
        return extrapolated_us, how, None
    ranks, cores = sharing
    if probe_us is not None:
        return probe_us, PROBE_MODEL.format(n=n, what=what, why=f"{ranks} ranks share {cores_text(cores)}"), probe_us
    return extrapolated_us, how + NO_PROBE.format(n=n, ranks=ranks, cores=cores_text(cores)), None
