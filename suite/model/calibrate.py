"""Link parameters from a stored run: α–β per class from its point-to-point records, and per op the link
with which the backend's algorithm reproduces the op's own series (suite.model's docstring)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

import numpy as np

from suite.model import fit
from suite.model.algorithms import terms
from suite.model.links import CLASSES, ClassLink, Links, complete_links
from suite.model.runs import Point


def p2p_links(run: dict) -> dict:
    """Per link class, the run's link figure (suite.model.link_rate.class_figures: the streaming probe's rate,
    the same pair's one-way latency, the declared rate across hosts where given), the one every reader of the
    run's link uses; the largest world size's where the run has several."""
    from suite.model.link_rate import class_figures

    out: dict = {}
    for _, f in sorted(class_figures(run).items(), key=lambda kv: -kv[0][2]):
        out.setdefault(
            f.link_class,
            ClassLink(
                link_class=f.link_class,
                alpha_us=f.alpha_us,
                beta_gbps=f.beta_gbps,
                alpha_ci_us=f.alpha_ci_us,
                beta_ci_gbps=f.beta_ci_gbps,
                source=f"the link's figure: rate {f.source}; latency {f.alpha_source}",
            ),
        )
    return out


def _link_of(cls: str, m: fit.Model, source: str) -> ClassLink:
    big = m.pieces[-1]
    small = None
    if m.piecewise is not None:
        small = (m.piecewise.below.alpha_us, m.piecewise.below.beta_gbps)
    return ClassLink(
        link_class=cls,
        alpha_us=big.alpha_us,
        beta_gbps=big.beta_gbps,
        alpha_ci_us=big.alpha_ci_us,
        beta_ci_gbps=big.beta_ci_gbps,
        knee_bytes=m.piecewise.knee_bytes if m.piecewise else None,
        small=small,
        source=source,
    )


def calibrate(
    points: Sequence[Point], algorithm: str, base: Links, rounds: int = 3, n_boot: int = fit.N_BOOT
) -> ClassLink | None:
    """The link (of the class the points' critical paths cross most) with which ``algorithm``
    reproduces the measured points: per point the model's α count A and bytes X of that class and the
    time F of the other class (``base``), then suite.model.fit.fit_model of (t − F)/A against X/A — per-step
    time against per-step bytes, the same relative-error fit and bootstrap as a series'; for the ring
    and one class exactly suite.model.fit.implied_link. Repeated ``rounds`` times (a step's slowest class
    depends on the links). Latency-only ops (barrier) get α alone (the median per-step time)."""
    if not points:
        return None
    topo0 = points[0].topo
    cls = "inter" if "inter" in topo0.classes() else "intra"
    links = complete_links(base, topo0) if base else None
    link = None
    for i in range(rounds):
        if links is None:  # no other evidence: a unit link for this class to find the structure, the
            # other class free (its time is put on this one; at one unit link each, a step's tie went to
            # intra and left no inter-node term to fit)
            links = {
                c: ClassLink(link_class=c, alpha_us=100.0, beta_gbps=0.1, source="start")
                if c == cls
                else ClassLink(link_class=c, alpha_us=0.0, beta_gbps=math.inf, source="no evidence: free")
                for c in CLASSES
            }
        ys, xs, sizes, rows = [], [], [], []
        for p in points:
            ts = terms(p.op, algorithm, p.topo, links, p.size_bytes)
            if ts is None:
                return None
            mine = [t for t in ts if t.link_class == cls]
            a = sum(t.alphas for t in mine)
            x = sum(t.bytes for t in mine)
            f = sum(t.time_us(links) for t in ts if t.link_class != cls)
            if a <= 0 or p.time_us - f <= 0:
                continue
            ys.append((p.time_us - f) / a)
            xs.append(x / a)
            sizes.append(p.size_bytes)
            rows.append((a, x, f, p.time_us, max([t.bursts for t in mine] or [1])))
        if not ys:
            return None
        src = (
            f"{points[0].op} through the {algorithm} model, {len(ys)} point(s) at "
            f"{'/'.join(str(n) for n in sorted({p.topo.ranks for p in points}))} ranks"
        )
        if len(set(xs)) < 2 or max(xs) <= 0:
            link = ClassLink(
                link_class=cls,
                alpha_us=statistics.median(ys),
                beta_gbps=math.inf,
                alpha_ci_us=(min(ys), max(ys)),
                source=src + " (latency only)",
            )
        else:
            boot = n_boot if i == rounds - 1 else 40
            m = fit.fit_model(xs, ys, n_boot=boot)
            if m is None:
                return None
            keep = _inliers(m, xs, ys)
            if len(keep) < len(xs):
                m2 = fit.fit_model([xs[j] for j in keep], [ys[j] for j in keep], n_boot=boot)
                if m2 is not None:
                    m, rows, xs = m2, [rows[j] for j in keep], [xs[j] for j in keep]
                    src += f" ({len(ys) - len(keep)} outlier(s) left out)"
            link = _link_of(cls, m, src)
            knee = link.knee_bytes or 0.0
            burst = _fit_burst([r for r, x in zip(rows, xs) if x >= knee], link, n_boot if i == rounds - 1 else 40)
            if burst is not None:
                link = dataclasses.replace(
                    link,
                    **burst,
                    source=src + f"; with a shaper burst of {burst['burst_bytes']:z.0f} B credited per fresh sender",
                )
        links = {**links, cls: link}
    return link


OUTLIER_REL = 0.25
"""A point the fitted line misses by more than this relative error *and* by more than 3x the median
miss is left out of the calibration (a latency spike of the shared CPUs at a small size would
otherwise pull β of every size: a relative-error fit weighs a 4 KiB point like a 4 MiB one)."""


def _inliers(m: fit.Model, xs, ys) -> list[int]:
    res = np.abs((np.asarray(m.time_us(np.asarray(xs, dtype=float))) - np.asarray(ys)) / np.asarray(ys))
    cut = max(OUTLIER_REL, 3 * float(np.median(res)))
    keep = [j for j, r in enumerate(res) if r <= cut]
    return keep if len(keep) >= max(4, len(xs) // 2) else list(range(len(xs)))


BURST_GAIN = 0.5
"""The burst credit is kept only where it at least halves the weighted squared error of the line."""


def _burst_solve(rows) -> tuple[float, float, float] | None:
    """(α, k µs/B, c µs) minimising Σ((t − F − Aα − Xk + c·bursts)/t)² with α, c >= 0, k > 0; None if none."""
    a, x, f, t, nb = (np.array([r[i] for r in rows], dtype=float) for i in range(5))
    y = (t - f) / t
    for cols in ((a, x, -nb), (x, -nb)):  # with α, then α = 0
        m = np.stack([c / t for c in cols], axis=1)
        sol, *_ = np.linalg.lstsq(m, y, rcond=None)
        sol = list(sol) if len(cols) == 3 else [0.0, *sol]
        if sol[0] >= 0 and sol[1] > 0 and sol[2] > 0:
            return float(sol[0]), float(sol[1]), float(sol[2])
    return None


def _fit_burst(rows, line: ClassLink, n_boot: int) -> dict | None:
    """A token-bucket link: time = Aα + X/β − bursts·burst/β (once per op, or per hop: ``Term.bursts``) fitted
    to the points above the knee,
    with bootstrap intervals; None unless it cuts the line's weighted squared error by BURST_GAIN."""
    if len(rows) < 4 or math.isinf(line.beta_gbps):
        return None
    sol = _burst_solve(rows)
    if sol is None:
        return None

    def sse(alpha, k, c):
        return sum(((t - f - a * alpha - x * k + c * nb) / t) ** 2 for a, x, f, t, nb in rows)

    k_line = 1.0 / (line.beta_gbps * 1e3)
    if sse(*sol) > BURST_GAIN * sse(line.alpha_us, k_line, 0.0):
        return None
    rng = np.random.default_rng(0)
    boots = [
        b
        for idx in rng.integers(0, len(rows), size=(n_boot, len(rows)))
        if (b := _burst_solve([rows[j] for j in idx])) is not None
    ]
    out = {"alpha_us": sol[0], "beta_gbps": 1.0 / (sol[1] * 1e3), "burst_bytes": sol[2] / sol[1]}
    if len(boots) >= n_boot // 2:
        al, kl = np.percentile([b[0] for b in boots], [2.5, 97.5]), np.percentile([b[1] for b in boots], [2.5, 97.5])
        out["alpha_ci_us"] = (float(al[0]), float(al[1]))
        out["beta_ci_gbps"] = (1.0 / (kl[1] * 1e3), 1.0 / (kl[0] * 1e3))
    return out
