"""α–β (latency–bandwidth) models of measured communication times.

The Hockney model says one message of S bytes costs ``time(S) = α + S/β``:
α is the fixed start-up latency (µs here), β the asymptotic bandwidth (GB/s,
1e9 bytes/s). ``fit_alpha_beta`` fits it to (size, median time) points of one
op and backend by weighted least squares on the *relative* error, so that the
latency-bound small sizes and the bandwidth-bound large sizes both count (an
unweighted fit is decided by the largest message alone, and a log-log plot
would show it missing every small size). Goodness of fit is R² of log(time) (the
spread a log-log plot shows), 1 = perfect.

The ring model over a link (suite/model/ring.py: ``Link``, ``ring_coefficients``, ``ring_time_us``,
``implied_link``) is re-exported here, where the reports and the predictions have always found it.

``fit_model`` is what the reports use. It adds, to the one-line fit:

- **parameter uncertainty**: 95% percentile intervals of α and β from a bootstrap over the
  sizes (the (size, time) points resampled with replacement and refitted, ``N_BOOT`` times,
  fixed seed; resamples with fewer than two distinct sizes are skipped). With few sizes (a
  piece of 3-4) the bootstrap knows little and its interval is optimistic;
- **a knee**: libraries switch protocol with size (Gloo and NCCL: eager to rendezvous, another
  algorithm), and one α/β across the switch fits neither side. Every split between two sizes
  with at least ``MIN_PIECE_POINTS`` sizes on each side is fitted as two independent lines; the
  split with the smallest total weighted squared error is kept only if it is at most
  ``KNEE_MARGIN`` (a fifth) of the one-line fit's and the one line misses by more than
  ``KNEE_FLOOR_RMS`` (3%) rms relative error (below that one line is as good as the
  measurement);
- **where the model does not hold**: a fit (or a piece) with R² below ``MIN_R2`` *and* an rms
  relative error above ``MAX_RMS_REL`` says "model does not fit" instead of printing α and β as if
  they meant something. (R² alone would reject a flat, latency-bound series that α describes to
  1%: its log-time variance is tiny, so R² is near 0 however good the fit.)
- **where the model cannot be tested**: a line has two parameters, so through two sizes it passes
  exactly (R² = 1 by construction, whatever the measurement). A fit (or a piece) of fewer than
  ``MIN_FIT_SIZES`` distinct sizes does not hold; the report says "too few sizes" instead.
- **where a model is shown**: a line (or a piece) is shown and used as a model only where it earns it
  (``no_model``): ``MIN_MODEL_SIZES`` distinct sizes, it holds (above), α's interval at most
  ``MAX_ALPHA_CI_SHARE`` of the smallest time wide and β's spanning at most ``MAX_BETA_CI_RATIO``. Every
  other series reads "no model: too few points" or "no model: too noisy", with the reason.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suite.model.ring import Link, implied_link, ring_coefficients, ring_time_us  # noqa: F401 - re-exported


@dataclass(frozen=True, kw_only=True)
class AlphaBeta:
    """A fitted ``time(S) = α + S/β``."""

    alpha_us: float
    """Start-up latency, µs (the intercept)."""
    beta_gbps: float
    """Asymptotic bandwidth, GB/s (1e9 bytes/s); inf when time does not grow with size."""
    r2: float
    """Coefficient of determination of log(time) under the model (1 = perfect)."""
    n_points: int
    """How many (size, time) points were fitted."""
    n_sizes: int = 0
    """How many distinct sizes among them (a line through fewer than MIN_FIT_SIZES cannot fail)."""
    rms_rel_err: float = 0.0
    """Root mean square of (model − time) / time over the points."""
    alpha_ci_us: tuple[float, float] | None = None
    """95% bootstrap interval of α over the sizes (``fit_model``); None if not computed."""
    beta_ci_gbps: tuple[float, float] | None = None
    """95% bootstrap interval of β over the sizes; the upper end is inf when some resample has no bandwidth term."""
    t_min_us: float = 0.0
    """The smallest time among the points (what α's interval is set against)."""

    @property
    def testable(self) -> bool:
        """Whether the points could contradict the line (MIN_FIT_SIZES distinct sizes or more)."""
        return self.n_sizes >= MIN_FIT_SIZES

    @property
    def holds(self) -> bool:
        """Whether the model describes the points at all: they could contradict it (``testable``) and
        do not (R² >= MIN_R2, or within MAX_RMS_REL of them)."""
        return self.testable and (self.r2 >= MIN_R2 or self.rms_rel_err <= MAX_RMS_REL)

    @property
    def latency_only(self) -> bool:
        """No bandwidth term: time does not grow over the sizes measured (β is then inf, not a number to show)."""
        return math.isinf(self.beta_gbps)

    @property
    def flat(self) -> bool:
        """Time does not grow measurably with size: no bandwidth term, or one whose interval has no upper end
        on a line within MAX_RMS_REL of the points (β is not resolved; α is the model)."""
        unbounded = self.beta_ci_gbps is not None and math.isinf(self.beta_ci_gbps[1])
        return self.latency_only or (unbounded and self.rms_rel_err <= MAX_RMS_REL)

    def no_model(self) -> str | None:
        """Why the line is not shown as a model, beginning "too few points" or "too noisy"; None where it earns
        it: MIN_MODEL_SIZES sizes, it holds (R² >= MIN_R2, or within MAX_RMS_REL of the points), α's interval
        at most MAX_ALPHA_CI_SHARE of the smallest time wide, β's spanning at most MAX_BETA_CI_RATIO (a flat
        line has no β to bound)."""
        if self.n_sizes < MIN_MODEL_SIZES:
            return f"too few points: {self.n_sizes} sizes, a model needs {MIN_MODEL_SIZES}"
        if not self.holds:
            return f"too noisy: R² {self.r2:z.2f} < {MIN_R2} and {self.rms_rel_err:z.0%} rms off the points"
        if self.alpha_ci_us is not None and self.t_min_us > 0:
            lo, hi = self.alpha_ci_us
            if hi - lo > MAX_ALPHA_CI_SHARE * self.t_min_us:
                return (
                    f"too noisy: α's interval [{lo:z.3g}, {hi:z.3g}] µs is wider than "
                    f"{MAX_ALPHA_CI_SHARE:z.0%} of the smallest time ({self.t_min_us:z.3g} µs)"
                )
        if self.beta_ci_gbps is not None and not self.flat:
            lo, hi = self.beta_ci_gbps
            if lo <= 0 or math.isinf(hi) or hi / lo > MAX_BETA_CI_RATIO:
                span = "unbounded" if lo <= 0 or math.isinf(hi) else f"{hi / lo:z.1f}x"
                return (
                    f"too noisy: β's interval [{lo:z.3g}, {hi:z.3g}] GB/s spans {span} "
                    f"(at most {MAX_BETA_CI_RATIO:z.0f}x)"
                )
        return None

    @property
    def shown(self) -> bool:
        """Whether the line earns being shown (and used) as a model: ``no_model`` has nothing to say."""
        return self.no_model() is None

    def time_us(self, size_bytes):
        """Model time in µs for a size (scalar or array) in bytes."""
        s = np.asarray(size_bytes, dtype=float)
        return self.alpha_us + (np.zeros_like(s) if math.isinf(self.beta_gbps) else s / (self.beta_gbps * 1e3))


MIN_R2 = 0.8
"""Below this R² (of log time) the α–β model does not describe the series (unless it is within
MAX_RMS_REL of every point, as a flat series can be): no α, β printed."""
MAX_RMS_REL = 0.05
"""A line within 5% rms relative error of the points describes them, whatever its R²."""
MIN_FIT_SIZES = 3
"""Distinct sizes a line needs before it can be tested: through two it passes exactly (R² = 1 by
construction), so a fit of two sizes is no evidence of α and β and is not shown as a fit."""
MIN_MODEL_SIZES = 4
"""Distinct sizes a line needs to be shown as a model: through three a line has one degree of freedom left,
and the bootstrap over three sizes knows too little to bound α and β (a knee of three points each side read
β 0.017 GB/s); four leave two."""
MAX_ALPHA_CI_SHARE = 0.5
"""α's 95% interval may be at most this share of the smallest measured time wide: wider, the line does not
pin down the small sizes' time (α 718 µs with an interval from 0 is no latency)."""
MAX_BETA_CI_RATIO = 4.0
"""β's 95% interval may span at most this factor (upper / lower end): a β known within 4x is a rate a reader
can compare; one spanning 87x ([0.059, 5.12] GB/s) is noise."""
MIN_PIECE_POINTS = MIN_MODEL_SIZES
"""Distinct sizes each piece of a piecewise fit needs (a piece is shown as a model only with MIN_MODEL_SIZES)."""
KNEE_MARGIN = 0.2
"""A knee is accepted when two pieces cut the one line's weighted squared error to a fifth or less
(with 10 sizes and 5-10% noise on one straight line a split search passes 0.5 in ~40% of cases, 0.2 in
~2%; a real 8x bandwidth / 20x latency switch is found at 5-10% noise in >95%) ..."""
KNEE_FLOOR_RMS = 0.03
"""... and the one line misses the points by more than this rms relative error."""
N_BOOT = 400


def fit_alpha_beta(size_bytes: Sequence[float], time_us: Sequence[float]) -> AlphaBeta | None:
    """Fit ``time = α + S/β`` to points; None with fewer than two distinct sizes.

    Minimises Σ((t_i − α − S_i·k)/t_i)² (relative error; k = 1/β in µs per byte),
    a linear least-squares problem solved directly. α is clamped at 0 and k at 0
    (a negative latency or bandwidth is not physical; the other parameter is
    then refitted alone).
    """
    s = np.asarray(size_bytes, dtype=float)
    t = np.asarray(time_us, dtype=float)
    ok = np.isfinite(s) & np.isfinite(t) & (t > 0) & (s >= 0)
    s, t = s[ok], t[ok]
    if len(np.unique(s)) < 2:
        return None
    w = 1.0 / t  # row weights: residual / t
    A = np.stack([np.ones_like(s), s], axis=1) * w[:, None]
    y = t * w  # == 1
    (alpha, k), *_ = np.linalg.lstsq(A, y, rcond=None)
    if k <= 0:  # latency-bound over the whole range: α alone (weighted mean)
        k = 0.0
        alpha = float(np.sum(w * w * t) / np.sum(w * w))
    elif alpha < 0:  # bandwidth-bound: S/β alone, through the origin
        alpha = 0.0
        k = float(np.sum(w * w * s * t) / np.sum(w * w * s * s))
    pred = np.maximum(alpha + k * s, 1e-12)
    # R² on log(t): the weighted problem's own R² is degenerate (every weighted target is 1),
    # and log space is what the log-log plot shows.
    lt = np.log(t)
    ss_tot = float(np.sum((lt - lt.mean()) ** 2))
    ss_res = float(np.sum((lt - np.log(pred)) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    beta = math.inf if k == 0 else 1.0 / (k * 1e3)  # k µs/B -> B/µs = 1/k -> GB/s = 1/(k·1e3)
    rms = float(np.sqrt(np.mean(((pred - t) / t) ** 2)))
    return AlphaBeta(
        alpha_us=float(alpha),
        beta_gbps=float(beta),
        r2=float(r2),
        n_points=int(len(s)),
        n_sizes=int(len(np.unique(s))),
        rms_rel_err=rms,
        t_min_us=float(t.min()),
    )


def _points(size_bytes, time_us) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(size_bytes, dtype=float)
    t = np.asarray(time_us, dtype=float)
    ok = np.isfinite(s) & np.isfinite(t) & (t > 0) & (s >= 0)
    order = np.argsort(s[ok], kind="stable")
    return s[ok][order], t[ok][order]


def _wsse(f: AlphaBeta, s: np.ndarray, t: np.ndarray) -> float:
    """The fit's own objective: the sum of squared relative errors."""
    return float(np.sum(((t - f.time_us(s)) / t) ** 2))


def _resampled_fits(s: np.ndarray, t: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``fit_alpha_beta`` on every row of resampled indices at once: (α in µs, 1/β in 1/(GB/s), valid).

    The same weighted least squares, clamps included, with each resample as multiplicities of the
    points (a batched QR of the weighted design matrix); sizes are scaled to at most 1 so the problem
    stays well conditioned. A resample with fewer than two distinct sizes is not valid (None there)."""
    n_boot, n = idx.shape
    counts = np.zeros((n_boot, n))
    np.add.at(counts, (np.repeat(np.arange(n_boot), n), idx.ravel()), 1.0)
    _, group = np.unique(s, return_inverse=True)
    distinct = (np.stack([counts[:, group == g].sum(axis=1) for g in range(group.max() + 1)], axis=1) > 0).sum(1)
    scale = float(s.max()) or 1.0
    w = np.sqrt(counts) / t  # per-row weight: multiplicity, and residual / t
    A = np.stack([w, w * (s / scale)], axis=2)  # (n_boot, n, 2)
    q, r = np.linalg.qr(A)
    valid = distinct >= 2
    r[~valid] = np.eye(2)  # solved but discarded
    x = np.linalg.solve(r, np.einsum("bni,bn->bi", q, w * t)[..., None])[..., 0]
    alpha, k = x[:, 0], x[:, 1] / scale
    ww = counts / (t * t)  # the clamped refits' sums, with multiplicities
    lat = k <= 0  # latency-bound over the whole range: α alone (weighted mean)
    alpha = np.where(lat, (ww * t).sum(1) / np.maximum(ww.sum(1), 1e-300), alpha)
    k = np.where(lat, 0.0, k)
    bw = ~lat & (alpha < 0)  # bandwidth-bound: S/β alone, through the origin
    k = np.where(bw, (ww * s * t).sum(1) / np.maximum((ww * s * s).sum(1), 1e-300), k)
    alpha = np.where(bw, 0.0, alpha)
    return alpha, k * 1e3, valid  # 1/β in 1/(GB/s) = k (µs/B) x 1e3


def bootstrap_intervals(
    size_bytes, time_us, *, n_boot: int = N_BOOT, seed: int = 0, confidence: float = 0.95
) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """Percentile intervals (α in µs, β in GB/s) from refitting resampled points; None if too few."""
    s, t = _points(size_bytes, time_us)
    if len(np.unique(s)) < 2:
        return None
    rng = np.random.default_rng(seed)
    alphas, ks, valid = _resampled_fits(s, t, rng.integers(0, len(s), size=(n_boot, len(s))))
    alphas, ks = alphas[valid], ks[valid]  # ks: 1/β, finite where β is not
    if len(alphas) < n_boot // 2:
        return None
    q = [50 * (1 - confidence), 50 * (1 + confidence)]
    a_lo, a_hi = (float(v) for v in np.percentile(alphas, q))
    k_lo, k_hi = (float(v) for v in np.percentile(ks, q))
    return (a_lo, a_hi), (1.0 / k_hi if k_hi > 0 else math.inf, 1.0 / k_lo if k_lo > 0 else math.inf)


@dataclass(frozen=True, kw_only=True)
class Piecewise:
    """Two α–β lines, one below the knee and one from it on."""

    below: AlphaBeta
    above: AlphaBeta
    knee_bytes: float
    """Smallest size of the upper piece."""
    improvement: float
    """1 − (the pieces' total weighted squared error) / (the one line's)."""

    def time_us(self, size_bytes):
        s = np.asarray(size_bytes, dtype=float)
        return np.where(s < self.knee_bytes, self.below.time_us(s), self.above.time_us(s))


def find_knee(size_bytes, time_us) -> Piecewise | None:
    """The best split into two α–β lines, if it passes the margins of the module docstring; else None."""
    s, t = _points(size_bytes, time_us)
    sizes = np.unique(s)
    single = fit_alpha_beta(s, t)
    if single is None or len(sizes) < 2 * MIN_PIECE_POINTS:
        return None
    err1 = _wsse(single, s, t)
    if math.sqrt(err1 / len(s)) <= KNEE_FLOOR_RMS:
        return None
    best = None
    for knee in sizes[MIN_PIECE_POINTS : len(sizes) - MIN_PIECE_POINTS + 1]:
        lo, hi = s < knee, s >= knee
        fl, fh = fit_alpha_beta(s[lo], t[lo]), fit_alpha_beta(s[hi], t[hi])
        err = _wsse(fl, s[lo], t[lo]) + _wsse(fh, s[hi], t[hi])
        if best is None or err < best[0]:
            best = (err, knee, fl, fh)
    err, knee, fl, fh = best
    if err > KNEE_MARGIN * err1:
        return None
    return Piecewise(below=fl, above=fh, knee_bytes=float(knee), improvement=1.0 - err / err1)


@dataclass(frozen=True, kw_only=True)
class Model:
    """What the reports show of a series: the one-line fit, and the two pieces when there is a knee;
    every line with its bootstrap intervals. Reads like an AlphaBeta (α of the small sizes, β of
    the large ones, the model's time), so plots and the ring model take either."""

    single: AlphaBeta
    piecewise: Piecewise | None = None

    @property
    def pieces(self) -> list[AlphaBeta]:
        return [self.single] if self.piecewise is None else [self.piecewise.below, self.piecewise.above]

    @property
    def alpha_us(self) -> float:
        return self.pieces[0].alpha_us

    @property
    def beta_gbps(self) -> float:
        return self.pieces[-1].beta_gbps

    @property
    def r2(self) -> float:
        return min(p.r2 for p in self.pieces)

    @property
    def n_points(self) -> int:
        return self.single.n_points

    @property
    def n_sizes(self) -> int:
        return self.single.n_sizes

    @property
    def testable(self) -> bool:
        return self.single.testable

    @property
    def holds(self) -> bool:
        return all(p.holds for p in self.pieces)

    def no_model(self) -> str | None:
        """Why the series is shown without a model (the first piece's reason, named); None where every line
        earns it."""
        for name, p in zip(("below the knee: ", "from the knee: ") if self.piecewise else ("",), self.pieces):
            why = p.no_model()
            if why:
                return why.replace(": ", f": {name}", 1) if name else why
        return None

    @property
    def shown(self) -> bool:
        return self.no_model() is None

    def time_us(self, size_bytes):
        return (self.single if self.piecewise is None else self.piecewise).time_us(size_bytes)


def fit_model(size_bytes, time_us, *, n_boot: int = N_BOOT, seed: int = 0) -> Model | None:
    """The one-line fit with its intervals, and the piecewise fit where a knee is found."""
    s, t = _points(size_bytes, time_us)
    single = fit_alpha_beta(s, t)
    if single is None:
        return None

    def with_ci(f: AlphaBeta, mask) -> AlphaBeta:
        ci = bootstrap_intervals(s[mask], t[mask], n_boot=n_boot, seed=seed)
        return f if ci is None else dataclasses.replace(f, alpha_ci_us=ci[0], beta_ci_gbps=ci[1])

    every = np.ones(len(s), dtype=bool)
    pw = find_knee(s, t)
    if pw is not None:
        pw = dataclasses.replace(
            pw, below=with_ci(pw.below, s < pw.knee_bytes), above=with_ci(pw.above, s >= pw.knee_bytes)
        )
    return Model(single=with_ci(single, every), piecewise=pw)
