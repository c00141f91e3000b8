"""The measurements of a stored run the models use: its topology and its collectives' points."""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

from suite import op_table
from suite.model.links import Topology

FIT_VARIANTS = {f.name: f.model.fitted for f in op_table.MODELLED}
"""The form of each op whose records are fitted (the tensor forms nccl-tests and FSDP use; the
collectives experiment measures the list forms too, with different costs on Gloo): the op table's
``Model.fitted`` (suite/op_table.py)."""


@dataclass(frozen=True, kw_only=True)
class Point:
    """One measured (op, topology, size, time) of a stored run."""

    op: str
    topo: Topology
    size_bytes: int
    time_us: float
    backend: str
    record: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)


def run_topology(run: dict) -> Topology:
    """Ranks and ranks per node of a stored run, from its hostnames (ranks are node-contiguous)."""
    su = (run.get("machine_info") or {}).get("suite") or {}
    hosts = list(su.get("hostnames") or [])
    n = len(hosts) or int(su.get("world_size") or 1)
    if not hosts:
        return Topology(n, n)
    per = {h: hosts.count(h) for h in hosts}
    p = max(set(per.values()), key=list(per.values()).count)
    return Topology(n, p) if n % p == 0 else Topology(n, n)


def record_topology(rec: dict) -> Topology:
    """The topology a record was measured at (``world_size`` ranks on ``hosts`` hosts)."""
    n, h = int(rec["world_size"]), int(rec.get("hosts") or 1)
    return Topology(n, n // h) if h > 0 and n % h == 0 else Topology(n, n)


def hostnames(run: dict) -> list[str]:
    return list((((run.get("machine_info") or {}).get("suite") or {}).get("hostnames")) or [])


def usable(r: dict) -> bool:
    """A record the models may fit: right, timed, and not of the oversubscribed pass (suite.results)."""
    from suite import results

    return r.get("n_wrong") in (0, None) and (r.get("time_us") or 0) > 0 and not results.oversubscribed(r)


def link_sources() -> list:
    """The specs whose records the link fits may use (their ``link_points`` hook), the library's own
    collective sweeps (``library_collectives``) first."""
    from suite import registry

    return sorted(
        (s for s in registry.discover().values() if s.link_points), key=lambda s: (not s.library_collectives, s.name)
    )


def collective_points(run: dict) -> list[Point]:
    """The run's measurements of the six ops in their fitted form (FIT_VARIANTS): sum for reducing
    ops, the first dtype; the records of the first experiment in ``link_sources()`` that has any."""
    from suite import results

    recs = [r for r in results.records(run) if usable(r)]
    topo = run_topology(run)
    out = []
    for spec in link_sources():
        for r in recs:
            if r.get("experiment") != spec.name or r.get("op") not in FIT_VARIANTS or not spec.link_points(r):
                continue
            if (r.get("variant") or r["op"]) != FIT_VARIANTS[r["op"]] or r.get("redop") not in (None, "sum", "none"):
                continue
            if int(r.get("world_size") or topo.ranks) != topo.ranks:
                continue
            out.append(
                Point(
                    op=r["op"],
                    topo=topo,
                    size_bytes=int(r["size_bytes"]),
                    time_us=float(r["time_us"]),
                    backend=str(r.get("backend")),
                    record=r,
                )
            )
        if out:
            break
    # one point per (op, size): the median over forms measured twice (in-place and out-of-place, dtypes)
    grouped: dict = {}
    for p in out:
        grouped.setdefault((p.op, p.size_bytes), []).append(p)
    return [
        dataclasses.replace(ps[0], time_us=statistics.median(p.time_us for p in ps))
        for _, ps in sorted(grouped.items())
    ]
