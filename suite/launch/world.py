"""The world a run starts: the experiments asked for, checked against it, and where NPROC is not given, its ranks
per node: one per usable core of this host (``cpu_load.default_world``). Torch-free; starts nothing."""

from __future__ import annotations

import os

from suite import registry
from suite.common.config import ConfigError
from suite.system import cpu_load

AUTO = "auto"
"""NPROC's (and --nproc's) value that asks for the default world (the Makefile's default)."""

MULTI_NODE_NPROC = 4
"""Ranks per node of a multi-node run that does not set NPROC (every node must start the same number)."""


def plan(a, cfg, env: dict) -> tuple[list[str], dict, str | None]:
    """The run's experiments, its layout (``preflight.layout``) and the line naming the world where it was chosen
    here (``choose_nproc``), every experiment checked against the world size (ConfigError)."""
    from suite.launch.preflight import layout

    names = asked_experiments(a.experiments)
    line = choose_nproc(a, names, env)
    lay = layout(a)
    check_world(names, cfg, lay["world_size"])
    return names, lay, line


def asked_experiments(asked: str) -> list[str]:
    """The experiments ``asked`` names (``all`` or empty: every one the spec runs in all); ConfigError on an
    unknown name."""
    found = registry.discover()
    names = (
        [n for n, spec in found.items() if spec.in_all]
        if asked in ("all", "")
        else [e.strip() for e in asked.split(",") if e.strip()]
    )
    unknown = [e for e in names if e not in found]
    if unknown or not names:
        raise ConfigError(
            f"unknown experiment(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(found)} or all"
        )
    return names


def check_world(names: list[str], cfg, world_size: int) -> None:
    """Each experiment of ``names`` checked against the world size and by its own ``check_world`` (ConfigError)."""
    for name in names:
        spec = registry.discover()[name]
        if world_size < spec.min_world_size:
            raise ConfigError(
                f"{spec.needs_ranks_because or name}: it needs at least {spec.min_world_size} ranks, got "
                f"{world_size} (NPROC x NNODES)"
            )
        if spec.check_world is not None:
            spec.check_world(getattr(cfg, name, None), world_size, cfg)


def usable_here() -> float | None:
    """The cores this process's ranks can use at once: its affinity (else the CPU count), bounded by a cgroup
    CPU quota."""
    from suite.system.sysinfo import container_limits

    allowed = cpu_load.allowed_cpus()
    return cpu_load.usable_cpus(len(allowed) if allowed else os.cpu_count(), container_limits().get("cgroup_cpus"))


def choose_nproc(a, names: list[str], env: dict) -> str | None:
    """Where neither ``--nproc`` nor NPROC_PER_NODE chose the ranks per node (or either says ``auto``), set
    ``a.nproc`` to the default world and return the line that says which and why; else None (``a`` unchanged).
    A multi-node run's default is MULTI_NODE_NPROC a node."""
    given = a.nproc if a.nproc is not None else env.get("NPROC_PER_NODE") or None
    if given is not None and str(given).strip() != AUTO:
        return None
    nnodes = a.nnodes if a.nnodes is not None else env.get("NNODES") or "1"
    if str(nnodes).strip() not in ("1", ""):
        a.nproc = str(MULTI_NODE_NPROC)
        return f"world: {MULTI_NODE_NPROC} ranks a node (the multi-node default; NPROC=n sets it)"
    need = max([2] + [registry.discover()[n].min_world_size for n in names])
    nproc, why = cpu_load.default_world(usable_here(), need)
    a.nproc = str(nproc)
    return f"world: {nproc} ranks ({why}; NPROC=n sets it)"
