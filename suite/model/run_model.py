"""What stored runs say as one model (``fit_runs``: topology, backend, links per op, algorithm choices)
and the check of the backend's documented algorithm against their measurements."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suite.model.algorithms import CANDIDATES, OPS
from suite.common.backends.record import resolve
from suite.common.backends.registry import record_of
from suite.model.backend_choice import Choice, backend_algorithm
from suite.model.calibrate import calibrate, p2p_links
from suite.model.links import CLASSES, ClassLink, Links, Topology, complete_links
from suite.model.prediction import BANDWIDTH_BOUND, predict
from suite.model.runs import Point, collective_points, run_topology


@dataclass(frozen=True, kw_only=True)
class RunModel:
    """What a stored run says: its topology and backend, the links per op and class, the algorithm choices."""

    topo: Topology
    backend: str
    p2p: dict
    """class -> ClassLink from point-to-point records."""
    op_links: dict
    """op -> {class -> ClassLink}: the op's calibrated link with the other class."""
    default_links: dict
    """class -> ClassLink for an op the run did not measure."""
    checks: dict
    """op -> text: the algorithm check against the run's measurements."""
    points: list
    debug_text: str = ""
    records: list = dataclasses.field(default_factory=list, repr=False)
    one_machine: bool = False
    """The runs it prices (the validation's check runs) ran their hosts as containers of one machine (the compose
    simulation): all their ranks share its cores (suite.model.contention)."""

    def links_for(self, op: str) -> dict:
        return self.op_links.get(op) or self.default_links

    def choice(self, op: str, size_bytes: int) -> Choice:
        return backend_algorithm(self.backend, op, size_bytes, self.records, self.debug_text, self.checks)


def fit_runs(runs: Sequence[dict], debug_text: str = "") -> RunModel:
    """Links and algorithm choices from one or more stored runs of one backend (their points pooled:
    runs at several world sizes constrain how time scales with n)."""
    from suite import results

    points = [p for r in runs for p in collective_points(r)]
    p2p: dict = {}
    for r in runs:
        for c, lk in p2p_links(r).items():
            p2p.setdefault(c, lk)
    recs = [x for r in runs for x in results.records(r)]
    backends = [p.backend for p in points] or [str(x.get("backend")) for x in recs]
    backend = max(set(backends), key=backends.count) if backends else "unknown"
    topo = run_topology(runs[0])
    op_links: dict = {}
    checks = check_algorithms(points, p2p) if points else {}
    for op in OPS:
        mine = [p for p in points if p.op == op]
        if not mine:
            continue
        alg = backend_algorithm(backend, op, max(p.size_bytes for p in mine), recs, debug_text).algorithm or "ring"
        lk = calibrate(mine, alg, p2p)
        if lk is not None:
            op_links[op] = complete_links({**p2p, lk.link_class: lk}, topo)
    if p2p:
        default = dict(p2p)
    else:
        cal = [ls for op, ls in op_links.items() if op != "barrier"]
        default = {}
        for c in CLASSES:
            ls = [x[c] for x in cal if c in x and math.isfinite(x[c].beta_gbps)]
            if ls:
                default[c] = ClassLink(
                    link_class=c,
                    alpha_us=statistics.median(x.alpha_us for x in ls),
                    beta_gbps=statistics.median(x.beta_gbps for x in ls),
                    source=f"median of the {len(ls)} ops' calibrated {c}-node links",
                )
    # an op latency-bound at every size the run measured shows no bandwidth term (β = inf): it gets the
    # β of the other evidence, and says so
    for op, ls in op_links.items():
        for c, lk in ls.items():
            d = default.get(c)
            if op != "barrier" and math.isinf(lk.beta_gbps) and d is not None and math.isfinite(d.beta_gbps):
                ls[c] = dataclasses.replace(
                    lk,
                    beta_gbps=d.beta_gbps,
                    beta_ci_gbps=d.beta_ci_gbps,
                    knee_bytes=None,
                    small=None,
                    source=f"{lk.source}; no bandwidth term at the sizes measured: β from the {d.source}",
                )
    return RunModel(
        topo=topo,
        backend=backend,
        p2p=p2p,
        op_links=op_links,
        default_links=default,
        checks=checks,
        points=points,
        debug_text=debug_text,
        records=recs,
    )


def _documented(backend: str) -> dict | None:
    """``backend``'s documented algorithm per op, {op: (algorithm, source)}, as its record names it; None: none."""
    ref = record_of(backend).model_reference
    return resolve(ref) if ref else None


def _rms_rel(points: Sequence[Point], algorithm: str, links: Links) -> float | None:
    errs = []
    for p in points:
        pr = predict(p.op, algorithm, p.topo, links, p.size_bytes)
        if pr is None:
            return None
        errs.append((pr.time_us - p.time_us) / p.time_us)
    return float(np.sqrt(np.mean(np.square(errs)))) if errs else None


def check_algorithms(points: Sequence[Point], base: Links) -> dict:
    """Per op: every candidate model calibrated on the op's measured points, its rms relative error,
    and the verdict on the backend's documented choice. One world size tells the models apart only by
    the shape in S (every α–β line looks alike), so the verdict says how many world sizes it saw."""
    out = {}
    for op in OPS:
        mine = [p for p in points if p.op == op and p.size_bytes > 0] or [p for p in points if p.op == op]
        if not mine:
            continue
        worlds = sorted({p.topo.ranks for p in mine})
        documented = _documented(mine[0].backend)
        ref = documented[op][0] if documented else "ring"
        lk0 = calibrate(mine, ref, base, n_boot=40) if ref in CANDIDATES[op] else None
        if lk0 is not None and op != "barrier":  # compare the models where bytes, not start-ups, decide
            at = complete_links({**base, lk0.link_class: lk0}, mine[0].topo)
            bw = [
                p
                for p in mine
                if (q := predict(op, ref, p.topo, at, p.size_bytes)) is not None
                and q.bandwidth_us >= BANDWIDTH_BOUND * p.time_us
            ]
            mine = bw if len(bw) >= 3 else mine
        errs = {}
        for alg in CANDIDATES[op]:
            lk = calibrate(mine, alg, base, n_boot=40)
            if lk is None:
                continue
            e = _rms_rel(mine, alg, complete_links({**base, lk.link_class: lk}, mine[0].topo))
            if e is not None:
                errs[alg] = e
        if not errs:
            continue
        best = min(errs, key=errs.get)
        doc = documented[op][0] if documented else None
        listing = ", ".join(f"{a} {100 * e:z.1f}%" for a, e in sorted(errs.items(), key=lambda kv: kv[1]))
        where = f"{len(worlds)} world size(s) {'/'.join(map(str, worlds))}"
        if max(errs.values()) - min(errs.values()) < 0.005:
            verdict = (
                f"not testable here: every model fits alike "
                f"({'one world size: each is an α–β line in S' if len(worlds) < 2 else 'same shape at these sizes'})"
            )
        elif doc is None or doc not in errs:
            verdict = f"best fit: {best}"
        elif errs[doc] <= errs[best] * 1.25 + 0.01:
            verdict = f"{doc} consistent with the measurements"
        else:
            verdict = f"measurements favour {best} over the documented {doc}"
        out[op] = f"{verdict} ({where}; rms error per model: {listing})"
    return out
