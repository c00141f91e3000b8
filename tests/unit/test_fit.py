"""suite.model.fit's model of a series on synthetic data: bootstrap intervals of α and β, the piecewise
fit at a protocol knee, and series where α–β does not hold."""

from __future__ import annotations

import dataclasses

import math

import numpy as np
import pytest

from suite.report import analysis, fit_table, fits
from suite.model import fit
from tests.unit.conftest import link_figure

SIZES = np.array([256 * 4**i for i in range(10)], dtype=float)  # 256 B .. 64 MiB


def _line(alpha_us, beta_gbps, sizes=SIZES):
    return alpha_us + sizes / (beta_gbps * 1e3)


def _noise(seed: int, sd: float, n: int = len(SIZES)):
    return np.exp(np.random.default_rng(seed).normal(0, sd, n))


def _row(m, **kw) -> fits.FitRow:
    """A fit table row of model ``m`` (an all_reduce series of 2 ranks unless ``kw`` says otherwise)."""
    base = dict(experiment="x", op="all_reduce", series="all_reduce sum", backend="gloo", device="cpu", world_size=2)
    return fits.FitRow(**(base | dict(fit=m, link_beta_gbps=1.0, ring_ratio=1.5, rate_ratio=None) | kw))


def _report(*rows) -> analysis.Report:
    return analysis.Report(
        run_name="r", environment=[], sections=[], fits=list(rows), links={}, link_rate=None, n_records=0
    )


def test_bootstrap_intervals_cover_a_known_alpha_beta_and_shrink_with_the_noise():
    wide = fit.fit_model(SIZES, _line(35.0, 2.5) * _noise(1, 0.10))
    narrow = fit.fit_model(SIZES, _line(35.0, 2.5) * _noise(1, 0.02))
    for m in (wide, narrow):
        f = m.single
        assert m.piecewise is None and f.holds
        assert f.alpha_ci_us[0] <= 35.0 <= f.alpha_ci_us[1] and f.alpha_ci_us[0] <= f.alpha_us <= f.alpha_ci_us[1]
        assert f.beta_ci_gbps[0] <= 2.5 <= f.beta_ci_gbps[1]
    for name in ("alpha_ci_us", "beta_ci_gbps"):
        (nlo, nhi), (wlo, whi) = getattr(narrow.single, name), getattr(wide.single, name)
        assert nhi - nlo < (whi - wlo) / 2
    again = fit.fit_model(SIZES, _line(35.0, 2.5) * _noise(1, 0.10))
    assert again.single.alpha_ci_us == wide.single.alpha_ci_us  # fixed seed: reproducible reports


def test_a_known_knee_is_found_and_each_piece_recovers_its_line():
    # eager below 64 KiB (10 µs, 0.5 GB/s), rendezvous from it on (200 µs, 4 GB/s)
    t = np.where(SIZES < 65536, _line(10.0, 0.5), _line(200.0, 4.0)) * _noise(2, 0.03)
    m = fit.fit_model(SIZES, t)
    pw = m.piecewise
    assert pw is not None and pw.knee_bytes == 65536 and pw.improvement > 1 - fit.KNEE_MARGIN
    assert pw.below.beta_gbps == pytest.approx(0.5, rel=0.15) and pw.above.beta_gbps == pytest.approx(4.0, rel=0.15)
    assert pw.above.alpha_us == pytest.approx(200.0, rel=0.2)
    assert pw.above.beta_ci_gbps[0] <= 4.0 <= pw.above.beta_ci_gbps[1]
    assert pw.below.beta_ci_gbps[0] <= pw.below.beta_gbps <= pw.below.beta_ci_gbps[1]
    # what reports read: α of the small sizes, β of the large ones, the model's time per piece
    assert m.alpha_us == pw.below.alpha_us and m.beta_gbps == pw.above.beta_gbps
    assert m.time_us(1 << 20) == pytest.approx(float(pw.above.time_us(1 << 20)))
    assert m.time_us(1024) == pytest.approx(float(pw.below.time_us(1024)))
    # the one line through both regimes misses by far more
    assert fit._wsse(m.single, SIZES, t) > 5 * (
        fit._wsse(pw.below, SIZES[SIZES < 65536], t[SIZES < 65536])
        + fit._wsse(pw.above, SIZES[SIZES >= 65536], t[SIZES >= 65536])
    )


def test_no_knee_on_one_straight_line():
    found = sum(fit.find_knee(SIZES, _line(35.0, 2.5) * _noise(seed, 0.05)) is not None for seed in range(50))
    assert found <= 3  # the margin keeps the split search from fitting noise
    assert fit.find_knee(SIZES, _line(35.0, 2.5)) is None  # exact: one line is as good as the data
    assert fit.find_knee(SIZES[:5], _line(35.0, 2.5, SIZES[:5]) * _noise(3, 0.3, 5)) is None  # too few sizes


def test_where_the_model_does_not_hold_one_line_says_so_not_a_row():
    # latency noise with no trend in size: R² of log time is negative
    flat = 100.0 * _noise(4, 0.3)
    m = fit.fit_model(SIZES, flat)
    assert m.r2 < fit.MIN_R2 and not m.holds
    row = _row(m)
    rep = _report(row, _row(fit.fit_model(SIZES, _line(35.0, 2.5) * _noise(5, 0.02)), series="good"))
    head, rows = fit_table.fit_table_rows(rep)
    (ok,) = rows  # the series that no line describes has no row of dashes
    col = {h: i for i, h in enumerate(head)}
    assert ok[col["series"]] == "good"
    assert float(ok[col["R²"]]) > 0.99 and "[" in ok[col["α (µs) [95% CI]"]]
    assert fit_table.fit_misses(rep) == [
        "1 series, no model: too noisy: x: all_reduce sum (R² -0.17 < 0.8 and 27% rms off the points)"
    ]
    two = dataclasses.replace(row, series="two sizes", fit=fit.fit_model(SIZES[:2], _line(35.0, 2.5, SIZES[:2])))
    misses = fit_table.fit_misses(dataclasses.replace(rep, fits=[row, two, row]))
    assert misses == [
        "1 series, no model: too few points (a model needs 4 sizes): x: two sizes",
        "2 series, no model: too noisy: x: all_reduce sum (R² -0.17 < 0.8 and 27% rms off the points), "
        "all_reduce sum (R² -0.17 < 0.8 and 27% rms off the points)",
    ]


def test_a_knee_prints_two_rows():
    t = np.where(SIZES < 65536, _line(10.0, 0.5), _line(200.0, 4.0)) * _noise(2, 0.03)
    row = _row(fit.fit_model(SIZES, t), op="send_recv", series="ping_pong", link_beta_gbps=4.0, ring_ratio=1.0)
    rep = _report(row)
    head, rows = fit_table.fit_table_rows(rep)
    assert [r[head.index("sizes")] for r in rows] == ["< 64K (knee)", ">= 64K"]
    assert [r[head.index("points")] for r in rows] == ["4", "6"]
    assert math.isclose(float(rows[1][head.index("β (GB/s) [95% CI]")].split()[0]), 4.0, rel_tol=0.15)


def test_a_flat_latency_bound_series_holds_although_its_r2_is_near_zero():
    sizes = [4, 16, 64, 256, 1024, 4096]
    times = [10.0, 10.1, 9.9, 10.05, 10.2, 10.1]  # alpha = 10 us describes it to 1%
    f = fit.fit_alpha_beta(sizes, times)
    assert f.r2 < fit.MIN_R2 and f.rms_rel_err < 0.02
    assert f.holds and f.alpha_us == pytest.approx(10.05, rel=0.01)
    noisy = fit.fit_alpha_beta(sizes, [10.0, 14.0, 8.0, 13.0, 7.5, 12.0])  # +-30%: noise, not a model
    assert not noisy.holds


def test_a_line_through_two_sizes_is_too_few_sizes_not_a_fit():
    # any two points lie on a line: R² = 1 whatever was measured, so it proves nothing about α and β
    two = fit.fit_model([1024.0, 65536.0], [20.0, 90.0])
    assert two.r2 == pytest.approx(1.0) and not two.testable and not two.holds
    cells = fit_table.fit_cells(two.single)
    assert cells == ["-", "-", "no model: too few points: 2 sizes, a model needs 4"]
    # three sizes can contradict a line, but leave it one degree of freedom: held, not shown as a model
    three = fit.fit_model([1024.0, 4096.0, 65536.0], _line(19.0, 1.0, np.array([1024.0, 4096.0, 65536.0])))
    assert three.testable and three.holds and not three.shown
    assert fit_table.fit_cells(three.single)[2] == "no model: too few points: 3 sizes, a model needs 4"
    four = np.array([1024.0, 4096.0, 16384.0, 65536.0])
    assert fit_table.fit_cells(fit.fit_model(four, _line(19.0, 1.0, four)).single)[2] == "1.000"
    # pieces of a knee follow the same rule
    assert fit.MIN_PIECE_POINTS >= fit.MIN_MODEL_SIZES


def test_inf_bandwidth_and_negative_r2_never_reach_the_fit_table():
    sizes = np.array([1e3, 1e4, 1e5, 1e6])
    flat = fit.fit_model(sizes, [51.0, 50.5, 50.0, 49.5])  # time falls with size: α alone, no β
    assert flat.holds and flat.single.latency_only and math.isinf(flat.beta_gbps) and flat.r2 < 0
    alpha, beta, r2 = fit_table.fit_cells(flat.single)
    assert alpha.startswith("50.") and beta == "- (time flat in size)" and r2 == "- (flat: within 1.1% rms)"
    # a flat series with a finite β whose bootstrap interval has no upper end
    # β is not resolved there: the line is flat, α its model, and no β is quoted
    nearly = fit.fit_model([4, 16, 64, 256, 1024, 4096], [10.0, 10.1, 9.9, 10.05, 10.2, 10.1])
    assert nearly.holds and math.isinf(nearly.single.beta_ci_gbps[1]) and nearly.single.flat and nearly.shown
    cells = fit_table.fit_cells(nearly.single)
    assert cells[1] == "- (time flat in size)" and cells[2].startswith("- (flat: within")
    for c in cells + [alpha, beta, r2]:
        assert "inf" not in c and not c.startswith("-0") and "nan" not in c


@pytest.mark.parametrize("shape", ["alpha_beta", "flat", "through_origin", "noisy"])
def test_batched_bootstrap_refits_equal_one_fit_per_resample(shape):
    """The bootstrap refits every resample at once; each must equal fit_alpha_beta on that resample,
    the clamps (latency-bound, bandwidth-bound) and the too-few-sizes case included."""
    rng = np.random.default_rng(7)
    sizes = np.array([1, 1, 8, 64, 512, 4096, 32768, 1 << 18, 1 << 21, 1 << 24], dtype=float)
    t = {
        "alpha_beta": 20 + sizes / 1e3,
        "flat": np.full(len(sizes), 30.0),
        "through_origin": sizes / 1e3 + 1e-3,
        "noisy": 5 + sizes / 5e3,
    }[shape] * rng.lognormal(0, 0.5 if shape == "noisy" else 0.05, len(sizes))
    idx = rng.integers(0, len(sizes), size=(300, len(sizes)))
    idx[0] = 0  # one size only: no fit
    alphas, inv_betas, valid = fit._resampled_fits(sizes, t, idx)
    for row, a, ib, ok in zip(idx, alphas, inv_betas, valid):
        one = fit.fit_alpha_beta(sizes[row], t[row])
        assert ok == (one is not None)
        if one is not None:
            assert a == pytest.approx(one.alpha_us, rel=1e-9, abs=1e-9)
            assert ib == pytest.approx(0.0 if math.isinf(one.beta_gbps) else 1 / one.beta_gbps, rel=1e-9, abs=1e-12)


WIGGLE = np.array([1.0, 1.15, 0.87, 1.1, 0.9, 1.12, 0.88, 1.1, 0.85, 1.2])
"""A fixed ±15% noise (no random draw: the bounds' tests do not depend on a generator)."""


def test_a_beta_whose_interval_spans_more_than_the_bound_is_no_model():
    # α 20 ms hides the bandwidth term until the last two sizes: R² 0.88 holds, but β is known within 6x only
    m = fit.fit_model(SIZES, _line(20000.0, 2.0) * WIGGLE)
    assert m.holds and m.r2 >= fit.MIN_R2
    lo, hi = m.single.beta_ci_gbps
    assert hi / lo > fit.MAX_BETA_CI_RATIO and not m.shown
    assert m.no_model().startswith("too noisy: β's interval [1, 6.47] GB/s spans 6.5x (at most 4x)")
    # the same link under the same noise with α 2 ms: β within 1.6x, a model
    assert fit.fit_model(SIZES, _line(2000.0, 2.0) * WIGGLE).shown


def test_an_alpha_whose_interval_is_wider_than_half_the_smallest_time_is_no_model():
    # ±30% at the small sizes of a bandwidth-bound line: β is known, α (50 µs) is not
    t = _line(50.0, 1.0) * np.array([1.0, 1.3, 0.75, 1.25, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0])
    m = fit.fit_model(SIZES, t)
    assert m.holds and m.no_model().startswith("too noisy: α's interval [38, 65.3] µs is wider than 50%")
    assert fit_table.fit_cells(m.single) == ["-", "-", "no model: " + m.no_model()]


def test_a_knee_needs_four_sizes_each_side():
    # a clear eager/rendezvous switch, three sizes each side: two lines of 3 points prove nothing
    six = SIZES[2:8]
    t = np.where(six < 65536, _line(10.0, 0.5, six), _line(200.0, 4.0, six))
    assert fit.find_knee(six, t) is None
    eight = SIZES[1:9]
    t = np.where(eight < 65536, _line(10.0, 0.5, eight), _line(200.0, 4.0, eight))
    assert fit.find_knee(eight, t) is not None


def test_an_asymptotic_busbw_above_the_links_rate_is_flagged_not_tabled():
    link = link_figure()
    m = fit.fit_model(SIZES, _line(35.0, 2.5))
    row = _row(m, experiment="collectives", op="broadcast", series="broadcast", link_beta_gbps=2.5, link=link)
    within = dataclasses.replace(row, series="all_gather", link_beta_gbps=1.05)  # inside the rate's interval
    rep = _report(row, within)
    head, rows = fit_table.fit_table_rows(rep)
    assert [r[head.index("series")] for r in rows] == ["all_gather"]
    assert fit_table.fit_misses(rep) == [
        "1 series, flagged, not tabled: the asymptotic busbw is above the link's rate, beyond its interval "
        "(a rate the link does not carry is no model of the op over it): "
        "collectives: broadcast (busbw∞ 2.5 GB/s > the link's 1 GB/s)"
    ]


def test_a_report_where_no_series_earns_a_model_has_no_empty_fit_table():
    from suite.report import render

    rep = _report(_row(fit.fit_model(SIZES, 100.0 * _noise(4, 0.3))))
    md = render.render_markdown(rep)
    assert "| experiment | series |" not in md and "- 1 series, no model: too noisy: x: all_reduce sum" in md
    page = render.render_html(rep)
    assert "<th>experiment</th>" not in page and "no model: too noisy" in page
