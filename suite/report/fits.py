"""The report's α–β fits: one per series of a size sweep, the reference link per (backend, device, world
size) that the ring model is drawn with, and a FitRow per fitted series with its ring-model comparison."""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

from suite import results
from suite.model.fit import Model
from suite.model.link_rate import LinkFigure
from suite.report.series import is_pair_matrix, is_sweep, series_by_label, varying_fields
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
    link: LinkFigure | None = None
    """The run's figure of the link the series ran over (suite.model.link_rate.link_figures), if it has one."""

    @property
    def above_link(self) -> bool:
        """The asymptotic busbw (``link_beta_gbps``) is above the link's rate, beyond its interval: flagged, not
        tabled (a rate no link of the run carries is not a model of it)."""
        if self.link is None or self.link_beta_gbps is None or not self.fit.shown:
            return False
        ceiling = self.link.beta_ci_gbps[1] if self.link.beta_ci_gbps else self.link.beta_gbps
        return self.link_beta_gbps > ceiling


def fit_series(recs: list[dict]):
    from suite.model.fit import fit_model

    pts = [(r["size_bytes"], r["time_us"]) for r in recs if r["size_bytes"] > 0 and r.get("time_us", 0) > 0]
    if len(pts) < 2:
        return None
    return fit_model([p[0] for p in pts], [p[1] for p in pts])


def reference_links(figures: dict, fits_by_group: dict) -> dict:
    """Per (backend, device, world_size): the link α, β the ring model is drawn with.

    The run's link figure (suite.model.link_rate.link_figures: the streaming probe's rate and the same
    pair's latency, or the declared rate across hosts), the one every reader of the link uses. A run
    without a point-to-point probe falls back to the median of the link parameters implied by every
    collective's fit: the ring prediction is then the consensus of the ops, and an op far from it runs a
    different algorithm or a slower path (the source says so).
    """
    from suite.model.fit import Link, implied_link

    out = {
        key: Link(
            alpha_us=f.alpha_us,
            beta_gbps=f.beta_gbps,
            source=f"the link's figure: rate {f.source}; latency {f.alpha_source}",
        )
        for key, f in figures.items()
    }
    implied: dict = {}
    # the collectives experiment runs the library's own algorithms; other experiments' sweeps
    # (hand-made algorithms, training steps) speak for the link only when it is absent
    prefer = [k for k in fits_by_group if library_collectives(k[0])] or list(fits_by_group)
    for exp, gk, backend, device, n in prefer:
        for op, f in fits_by_group[(exp, gk, backend, device, n)].values():
            if f is not None and f.shown and math.isfinite(f.beta_gbps) and f.beta_gbps > 0:
                link = implied_link(op, n, f)
                if link is not None:
                    implied.setdefault((backend, device, n), []).append(link)
    for key, ls in implied.items():
        if key not in out:
            out[key] = Link(
                alpha_us=statistics.median(x.alpha_us for x in ls),
                beta_gbps=statistics.median(x.beta_gbps for x in ls),
                source=f"no point-to-point probe: median of {len(ls)} fit(s) mapped through the ring model",
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
    figures: dict = dataclasses.field(default_factory=dict)
    """The run's link figures by (backend, device, world size) (suite.model.link_rate.link_figures)."""

    def fitted(self, key: tuple) -> dict:
        """label -> (op, fit) of the sweep's series that could be fitted."""
        return {k: v for k, v in self.fits[key].items() if v[1] is not None}


def fit_sweeps(recs: list[dict], by_exp: dict, figures: dict | None = None) -> Sweeps:
    """Fits for every sweep of ``by_exp`` (suite.report.series.groups_by_experiment), and the links (the run's
    link figures, suite.model.link_rate.link_figures)."""
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
    figures = figures or {}
    links = reference_links(figures, fits_by_group)
    return Sweeps(series=sweep_series, fits=fits_by_group, links=links, figures=figures)


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
                link=sweeps.figures.get((backend, device, n)),
            )
        )
    return rows
