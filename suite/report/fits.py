"""The report's α–β fits: one per series of a size sweep, the reference link per (backend, device, world
size) that the ring model is drawn with, and a FitRow per fitted series with its ring-model comparison."""

from __future__ import annotations

import math
import statistics
from collections import OrderedDict
from dataclasses import dataclass

from suite import results
from suite.model.fit import Model
from suite.report.series import group_key, is_pair, is_pair_matrix, is_sweep, series_by_label, varying_fields
from suite.report.specs import library_collectives


@dataclass(frozen=True, kw_only=True)
class FitRow:
    experiment: str
    op: str
    series: str
    backend: str
    device: str
    world_size: int
    fit: Model
    """The series' α–β model: one line, or two pieces around a knee (suite.fit.fit_model)."""
    link_beta_gbps: float | None
    """β of a link implied by the ring model (= asymptotic busbw)."""
    ring_ratio: float | None
    """Measured / ring-model time at the largest size."""
    rate_ratio: float | None
    """link β / configured LINK_RATE."""


def fit_series(recs: list[dict]):
    from suite.model.fit import fit_model

    pts = [(r["size_bytes"], r["time_us"]) for r in recs if r["size_bytes"] > 0 and r.get("time_us", 0) > 0]
    if len(pts) < 2:
        return None
    return fit_model([p[0] for p in pts], [p[1] for p in pts])


def reference_links(recs: list[dict], fits_by_group: dict) -> dict:
    """Per (backend, device, world_size): the link α, β the ring model is drawn with.

    Point-to-point records (``src``/``dst`` present) measure one link directly; if the run
    has them their fits are used (median over series). Otherwise the median of the link
    parameters implied by every collective's fit: the ring prediction is then the
    consensus of the ops, and an op far from it runs a different algorithm or a slower path.
    """
    from suite.model.fit import Link, implied_link

    out = {}
    p2p: dict = {}
    for r in recs:
        if is_pair(r) and r["op"] == "send_recv" and r["size_bytes"] > 0:
            p2p.setdefault((r["backend"], r["device"], r["world_size"]), []).append(r)
    for key, rs in p2p.items():
        # ping-pong / pair-matrix records time one message on one link; prefer them
        direct = [
            r
            for r in rs
            if any(w in str(r.get(f, "")).lower() for f in ("table", "pattern", "variant") for w in ("ping", "pair"))
        ]
        rs = direct or rs
        groups: OrderedDict = OrderedDict()
        for r in rs:
            groups.setdefault(group_key(r), []).append(r)
        fs = [
            f
            for g in groups.values()
            for s in series_by_label(g, varying_fields(g)).values()
            if (f := fit_series(s)) and f.holds and math.isfinite(f.beta_gbps)
        ]
        if fs:
            out[key] = Link(
                alpha_us=statistics.median(f.alpha_us for f in fs),
                beta_gbps=statistics.median(f.beta_gbps for f in fs),
                source=f"median of {len(fs)} point-to-point fit(s)",
            )
    implied: dict = {}
    # the collectives experiment runs the library's own algorithms; other experiments' sweeps
    # (hand-made algorithms, training steps) speak for the link only when it is absent
    prefer = [k for k in fits_by_group if library_collectives(k[0])] or list(fits_by_group)
    for exp, gk, backend, device, n in prefer:
        for op, f in fits_by_group[(exp, gk, backend, device, n)].values():
            if f is not None and f.holds and math.isfinite(f.beta_gbps) and f.beta_gbps > 0:
                link = implied_link(op, n, f)
                if link is not None:
                    implied.setdefault((backend, device, n), []).append(link)
    for key, ls in implied.items():
        if key not in out:
            out[key] = Link(
                alpha_us=statistics.median(x.alpha_us for x in ls),
                beta_gbps=statistics.median(x.beta_gbps for x in ls),
                source=f"median of {len(ls)} fit(s) mapped through the ring model",
            )
    return out


@dataclass(frozen=True)
class Sweeps:
    """A report's size sweeps (groups of two or more sizes, pair matrices aside), by (experiment, group key,
    backend, device, world size): their series by label, each series' (op, fit or None), and the reference
    links (``reference_links``)."""

    series: dict
    fits: dict
    links: dict

    def fitted(self, key: tuple) -> dict:
        """label -> (op, fit) of the sweep's series that could be fitted."""
        return {k: v for k, v in self.fits[key].items() if v[1] is not None}


def fit_sweeps(recs: list[dict], by_exp: dict) -> Sweeps:
    """Fits for every sweep of ``by_exp`` (suite.report.series.groups_by_experiment), and the links."""
    sweep_series: dict = {}
    fits_by_group: dict = {}
    recs = results.communication_records(recs)
    for exp, groups in by_exp.items():
        for (gk, backend, device, n), rs in groups.items():
            rs = results.communication_records(rs)  # the oversubscribed pass's times measure no link
            if is_pair_matrix(rs):
                continue
            if not is_sweep(rs):
                continue
            ser = series_by_label(rs, varying_fields(rs))
            sweep_series[(exp, gk, backend, device, n)] = ser
            fits_by_group[(exp, gk, backend, device, n)] = {lab: (s[0]["op"], fit_series(s)) for lab, s in ser.items()}
    return Sweeps(series=sweep_series, fits=fits_by_group, links=reference_links(recs, fits_by_group))


def fit_rows(key: tuple, sweeps: Sweeps, link_rate: tuple[str, float] | None) -> list[FitRow]:
    """One FitRow per fitted series of the sweep ``key``: its link β, measured / ring-model time at the
    largest size, and link β / LINK_RATE where the series crosses hosts."""
    from suite.model.fit import ring_coefficients, ring_time_us

    exp, gk, backend, device, n = key
    ser = sweeps.series[key]
    link = sweeps.links.get((backend, device, n))
    rows = []
    for lab, (sop, f) in sweeps.fitted(key).items():
        srecs = [r for r in ser[lab] if r["size_bytes"] > 0]
        smax = max(r["size_bytes"] for r in srecs)
        tmax = next(r["time_us"] for r in srecs if r["size_bytes"] == smax)
        c = ring_coefficients(sop, n)
        link_beta = f.beta_gbps * c[1] if c and math.isfinite(f.beta_gbps) else None
        rt = ring_time_us(sop, n, link, smax) if link is not None and c else None
        rows.append(
            FitRow(
                experiment=exp,
                op=sop,
                series=f"{gk} {lab}" if lab != gk else gk,
                backend=backend,
                device=device,
                world_size=n,
                fit=f,
                link_beta_gbps=link_beta,
                ring_ratio=float(tmax / rt) if rt else None,
                # LINK_RATE shapes the links between hosts: a one-host series has none
                rate_ratio=(link_beta / link_rate[1])
                if (link_beta and link_rate and max(int(r.get("hosts") or 1) for r in srecs) > 1)
                else None,
            )
        )
    return rows
