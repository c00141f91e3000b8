"""The DDP step at N ranks from the ddp experiment's records (suite.model's docstring: compute +
bucket all_reduces − the hidden share)."""

from __future__ import annotations

import math

from suite.model.links import Links, Topology
from suite.model.prediction import predict
from suite.model.run_model import RunModel
from suite.model.runs import usable


def ddp_baselines(run: dict) -> list[dict]:
    """Per model of the ddp experiment: the default-DDP record and the numbers the step model needs."""
    from suite import results

    out = []
    for r in results.records(run):
        if r.get("experiment") != "ddp" or r.get("op") != "ddp_step" or r.get("label") != "ddp" or not usable(r):
            continue
        need = ("noop_step_ms", "allreduce_ms", "solo_step_ms", "bucket_sizes", "overlap_saved_ms")
        if all(r.get(k) is not None for k in need):
            out.append(r)
    return out


def record_topology(rec: dict) -> Topology:
    """The topology a record was measured at (``world_size`` ranks on ``hosts`` hosts)."""
    n, h = int(rec["world_size"]), int(rec.get("hosts") or 1)
    return Topology(n, n // h) if h > 0 and n % h == 0 else Topology(n, n)


def predict_ddp(rec: dict, topo: Topology, links: Links, algorithm: str) -> dict:
    """The DDP step at ``topo`` (suite.model's docstring): compute + bucket all_reduces − the hidden share."""
    measured_topo = record_topology(rec)
    buckets = [int(b) for b in rec["bucket_sizes"]]

    def comm_us(t):
        return sum(predict("all_reduce", algorithm, t, links, b).time_us for b in buckets)

    comm0 = comm_us(measured_topo)
    frac = min(max(rec["overlap_saved_ms"] / rec["allreduce_ms"], 0.0), 1.0) if rec["allreduce_ms"] > 0 else 0.0
    window_us = (rec.get("ddp_logger_backward_compute_ms") or math.inf) * 1e3
    noop_us, solo_us = rec["noop_step_ms"] * 1e3, rec["solo_step_ms"] * 1e3

    def step_us(comm):
        return noop_us + comm - min(frac * comm, window_us)

    comm = comm_us(topo)
    step = step_us(comm)
    return {
        "model": rec.get("model"),
        "ranks": topo.ranks,
        "ranks_per_node": topo.ranks_per_node,
        "n_buckets": len(buckets),
        "bucket_sizes": buckets,
        "compute_us": noop_us,
        "solo_step_us": solo_us,
        "comm_us": comm,
        "hidden_fraction": frac,
        "hidden_us": min(frac * comm, window_us),
        "step_us": step,
        "scaling_efficiency": solo_us / step if step > 0 else None,
        "algorithm": algorithm,
        "measured_ranks": measured_topo.ranks,
        "measured_step_us": rec["time_us"],
        "model_step_at_measured_us": step_us(comm0),
        "model_comm_at_measured_us": comm0,
        "measured_allreduce_us": rec["allreduce_ms"] * 1e3,
    }


def ddp_baselines_from(model: RunModel) -> list[dict]:
    return ddp_baselines({"benchmarks": [{"extra_info": r} for r in model.records]})
