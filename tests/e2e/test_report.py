"""Reports, fits and comparisons from stored runs (suite.report.cli, suite.model.fit, suite.report.compare).

The committed fixture ``tests/fixtures/collectives-gloo-2/bench.json`` is a real run:
``python -m suite.launch --nproc 2 --backend gloo --device cpu --experiments collectives
--max-bytes 64K --iters 10`` (133 cases). Runs with a planted change are synthesised
from it by scaling its per-iteration samples.
"""

from __future__ import annotations

import base64
import copy
import csv
import html
import io
import json
import math
import re
import shutil
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from matplotlib.colors import to_rgba

from suite import results

from suite.report import analysis, compare, fit_table, render, sections, summary, cli as report
import suite.report.compare.forest as forest
from suite.report.compare.case_identity import case_key, describe_key
from suite.report.compare.verdicts import VERDICT_COLORS

from suite.launch import cli as launch
from suite.model import fit, link_rate
from tests.browser import (
    FIRST_SCREEN,
    SMALL_SCREEN,
    assert_on_small_screen,
    assert_opens_on,
    needs_chromium,
    open_page,
    run_chromium,
)
from tests.conftest import make as _make  # `make` as a user types it
from tests.helpers.stored_runs import FIXTURE, stored_run, save_run, scaled_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --- α–β fit -----------------------------------------------------------------------------------


def test_fit_recovers_known_alpha_beta_from_noisy_samples():
    alpha_us, beta_gbps = 35.0, 2.5
    rng = np.random.default_rng(7)
    sizes = [1 << k for k in range(8, 27, 2)]  # 256 B .. 64 MiB
    medians = []
    for s in sizes:
        true = alpha_us + s / (beta_gbps * 1e3)
        samples = true * rng.lognormal(0.0, 0.05, 50)  # 5% multiplicative jitter per iteration
        medians.append(float(np.median(samples)))
    f = fit.fit_alpha_beta(sizes, medians)
    assert f is not None and f.n_points == len(sizes)
    assert f.alpha_us == pytest.approx(alpha_us, rel=0.05)
    assert f.beta_gbps == pytest.approx(beta_gbps, rel=0.05)
    assert f.r2 > 0.99
    assert f.time_us(1 << 20) == pytest.approx(alpha_us + (1 << 20) / (beta_gbps * 1e3), rel=0.05)


def test_fit_exact_and_degenerate_cases():
    sizes = np.array([1e3, 1e4, 1e5, 1e6])
    f = fit.fit_alpha_beta(sizes, 10.0 + sizes / 4e3)  # α 10 µs, β 4 GB/s, no noise
    assert (f.alpha_us, f.beta_gbps, f.r2) == (pytest.approx(10.0), pytest.approx(4.0), pytest.approx(1.0))
    flat = fit.fit_alpha_beta(sizes, [51.0, 50.5, 50.0, 49.5])  # time falls with size: no bandwidth term
    assert math.isinf(flat.beta_gbps) and flat.alpha_us == pytest.approx(50.0, rel=0.03)
    bw = fit.fit_alpha_beta(sizes, sizes / 4e3 * np.array([0.9, 1.0, 1.0, 1.0]))  # unclamped α would be < 0
    assert bw.alpha_us == 0.0 and bw.beta_gbps == pytest.approx(4.0, rel=0.05)
    assert fit.fit_alpha_beta([1024, 1024], [5.0, 6.0]) is None  # one size: nothing to fit


def test_ring_model_coefficients_and_implied_link():
    assert fit.ring_coefficients("all_reduce", 4) == (6.0, 1.5)  # 2(n-1) α, 2(n-1)/n S/β
    assert fit.ring_coefficients("all_gather", 4) == (3.0, 0.75)
    assert fit.ring_coefficients("broadcast", 8) == (7.0, 1.0)
    assert fit.ring_coefficients("barrier", 4) is None
    f = fit.AlphaBeta(alpha_us=60.0, beta_gbps=2.0, r2=1.0, n_points=5)
    link = fit.implied_link("all_reduce", 4, f)
    assert (link.alpha_us, link.beta_gbps) == (pytest.approx(10.0), pytest.approx(3.0))
    # the ring model over the implied link reproduces the fit
    assert fit.ring_time_us("all_reduce", 4, link, 1e6) == pytest.approx(float(f.time_us(1e6)))


def test_link_rate_parsing_follows_tc_units():
    assert link_rate.parse_link_rate("1gbit") == pytest.approx(0.125)
    assert link_rate.parse_link_rate("200mbit") == pytest.approx(0.025)
    assert link_rate.parse_link_rate("125mbps") == pytest.approx(0.125)  # tc: bps = bytes per second
    assert link_rate.parse_link_rate("1000000") == pytest.approx(0.000125)  # bare number: bit/s
    assert link_rate.parse_link_rate("fast") is None
    mi = {"suite": {"hosts": {"a": {"env": {"LINK_RATE": "1gbit"}}, "b": {"env": {"LINK_RATE": "200mbit"}}}}}
    assert link_rate.configured_link_rate(mi) == ("200mbit", pytest.approx(0.025))  # the slowest host bounds it
    assert link_rate.configured_link_rate({}) is None


# --- comparison ---------------------------------------------------------------------------------


def test_case_key_is_identity_not_measurement():
    a = {
        "experiment": "p2p",
        "op": "send_recv",
        "src": 0,
        "dst": 1,
        "size_bytes": 8,
        "time_us": 5.0,
        "samples_us": [5.0],
        "samples_per_s": 3.2,
        "peak_memory_bytes": 100,
    }
    b = dict(a, src=1, dst=0, time_us=9.0, samples_per_s=1.0, peak_memory_bytes=999)
    assert case_key(a) != case_key(b)
    assert case_key(a) == case_key(dict(a, time_us=7.0, samples_per_s=9.9, peak_memory_bytes=1))


def test_compare_flags_planted_20pct_slowdown_not_1pct_noise(tmp_path):
    base = stored_run()
    rng = np.random.default_rng(3)
    slow = scaled_run(base, lambda n: np.full(n, 1.20))
    noise = scaled_run(base, lambda n: rng.lognormal(0.0, 0.01, n))
    recs = results.records(base)

    c = compare.compare_records(recs, results.records(slow))
    assert c.failed and c.overall == "slower"
    assert c.overall_ratio == pytest.approx(1.20, rel=1e-6)
    assert not any(r.verdict == "faster" for r in c.cases)
    assert len(c.cases) == len(recs) and not c.only_base and not c.only_new

    # one run a side whose 10 samples spread 20x: no case can be told same within 5%, none is flagged
    c = compare.compare_records(recs, results.records(noise))
    assert not c.failed and c.overall == "same"
    assert all(r.verdict == "inconclusive" for r in c.cases) and c.gate == "INCONCLUSIVE"

    # the CLI gate: exit 1 on the regression, 3 when it cannot tell, 0 when it may pass, 2 on unreadable input
    b, s, n = save_run(base, tmp_path / "base"), save_run(slow, tmp_path / "slow"), save_run(noise, tmp_path / "noise")
    assert report.main(["compare", str(b), str(s), "--out", str(tmp_path / "cmp")]) == 1
    assert (tmp_path / "cmp" / "compare.png").read_bytes().startswith(PNG_MAGIC)
    assert "-&gt; slower" in (tmp_path / "cmp" / "compare.html").read_text()
    assert report.main(["compare", str(b), str(n)]) == 3
    assert report.main(["compare", str(b), str(n), "--max-inconclusive", "1"]) == 0
    assert report.main(["compare", str(b), str(n), "--alpha", "0"]) == 2
    assert report.main(["compare", str(b), str(tmp_path / "missing")]) == 2


@pytest.mark.slow
def test_make_compare_is_a_regression_gate(tmp_path):
    base = stored_run()
    slow = save_run(scaled_run(base, lambda n: np.full(n, 1.25)), tmp_path / "slow")
    r = _make("compare", f"BASE={FIXTURE}", f"NEW={slow}")
    assert r.returncode != 0, r.stdout + r.stderr
    assert "gate: FAIL" in r.stdout and "-> slower" in r.stdout
    r = _make("compare", f"BASE={FIXTURE}", f"NEW={FIXTURE}")  # a run with itself: nothing to estimate
    assert r.returncode == 0 and "-> same (identical runs)" in r.stdout and "gate: PASS" in r.stdout, r.stdout
    rng = np.random.default_rng(3)
    noise = save_run(scaled_run(base, lambda n: rng.lognormal(0.0, 0.01, n)), tmp_path / "noise")
    r = _make("compare", f"BASE={FIXTURE}", f"NEW={noise}")  # 10 samples spread 20x: cannot tell
    assert r.returncode == 2 and "gate: INCONCLUSIVE" in r.stdout, r.stdout + r.stderr  # make: exit 3 -> 2
    assert "# detectable with one run a side here: changes beyond +" in r.stdout  # what it could have told
    r = _make("compare", f"BASE={FIXTURE}", f"NEW={noise}", "MAX_INCONCLUSIVE=1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gate: PASS" in r.stdout
    r = _make("compare")
    assert r.returncode != 0 and "usage: make compare" in r.stderr


PLANTED = "collectives-all_reduce-gloo-cpu-float32-sum-65536B-inplace"


@pytest.fixture(scope="module")
def compare_page(tmp_path_factory):
    """``python -m suite.report compare BASE NEW --out DIR`` where BASE is part of the fixture run (45 cases) and
    NEW the same run with the PLANTED case 3x slower; returns the page and the forest figure it opens on, as
    matplotlib drew it (the real function, watched)."""
    d = tmp_path_factory.mktemp("compare")
    run = stored_run()
    keep = ("all_reduce", "reduce", "broadcast", "barrier")
    run["benchmarks"] = [b for b in run["benchmarks"] if b["extra_info"]["variant"] in keep]
    slow = copy.deepcopy(run)
    for b in slow["benchmarks"]:
        e = b["extra_info"]
        if describe_key(case_key(e)) == PLANTED:
            e["samples_us"] = [3.0 * x for x in e["samples_us"]]
            e["time_us"] *= 3.0
    drawn = []
    real = forest.forest_figure
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(forest, "forest_figure", lambda *a: drawn.append(real(*a)) or drawn[-1])
        status = report.main(
            ["compare", str(save_run(run, d / "base")), str(save_run(slow, d / "slow")), "--out", str(d)]
        )
    assert status == 1  # the planted slowdown fails the gate
    (fig,) = drawn
    return d / "compare.html", fig, len(run["benchmarks"])


def test_compare_page_opens_on_a_forest_plot_with_the_planted_slowdown_in_red(compare_page):
    """The element after the title is the forest plot, a PNG that decodes, with its one-line caption; the figure
    draws the planted case in the slower colour and every other case in another."""
    page, fig, n = compare_page
    text = page.read_text()
    m = re.search(
        r"<body><h1>Comparison</h1><div id='first-screen'>.*?</div><figure id='headline-figure'>"
        r"<img [^>]*src='data:image/png;base64,([^']+)'><figcaption>([^<]+)</figcaption></figure>",
        text,
    )
    assert m, text[:2000]
    screen = html.unescape(text[text.index("<div id='first-screen'>") : text.index("<figure")])
    assert "verdict: gate: FAIL (regression: 1 case(s) slower beyond the tolerance" in screen  # its verdict first
    assert "backend gloo on cpu, 2 ranks; base: " in screen and "<b>detectable</b>: detectable with one run" in screen
    # like the report, the page declares that it loads nothing (a browser refuses any fetch it would make)
    assert "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src data:;" in text
    png = base64.b64decode(m.group(1))
    assert png == (page.parent / "compare.png").read_bytes()
    pixels = matplotlib.image.imread(io.BytesIO(png), format="png")
    assert pixels.shape[0] > 200 and pixels.shape[1] > 800
    assert m.group(2).startswith(f"1 of {n} cases slower beyond the 5% tolerance")
    (ax,) = fig.axes
    gids = {a.get_gid(): a for a in ax.get_lines() if a.get_gid()}
    markers = {g: a for g, a in gids.items() if g.startswith("case:") and not g.endswith("/ci")}  # bars: /ci
    slower = to_rgba(VERDICT_COLORS["slower"])
    assert to_rgba(markers[f"case:{PLANTED}"].get_color()) == slower
    assert [g for g, a in markers.items() if to_rgba(a.get_color()) == slower] == [f"case:{PLANTED}"]
    assert len(markers) <= forest.MAX_ROWS
    # the ratio axis is labelled above the rows too: a tall forest shows its scale on the first screen
    ticks = [t for t in ax.xaxis.get_major_ticks() if t.label1.get_text()]
    assert ticks and all(t.label2.get_visible() and t.label2.get_text() == t.label1.get_text() for t in ticks)
    shown = f"Not drawn: {n - len(markers)} of {n}" if len(markers) < n else "Not drawn"
    assert (shown in m.group(2)) == (len(markers) < n)


# --- the report ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_report(tmp_path_factory):
    """`make report` on a copy of the fixture run (reports go beside the run)."""
    run = tmp_path_factory.mktemp("fixture") / "collectives-gloo-2"
    shutil.copytree(FIXTURE, run)
    r = _make("report", f"RUN={run}")
    assert r.returncode == 0, r.stdout + r.stderr
    return run, r.stdout


def test_report_from_fixture(fixture_report):
    run, out = fixture_report
    html_path = run / "report" / "index.html"
    assert f"report: {html_path}" in out
    recs = results.records(results.load_run(run))
    variants = {r["variant"] for r in recs}
    pngs = sorted((run / "report").glob("*.png"))
    # one busbw+latency figure (or bar chart) per collective variant, the headline figure over them all, and the
    # prediction section's predicted against measured
    assert len(pngs) == len(variants) + 2 and (run / "report" / "headline-busbw.png").is_file()
    assert (run / "report" / "prediction-measured.png").is_file()
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in pngs)
    page = html_path.read_text()
    assert page.count("data:image/png;base64,") == len(pngs)  # self-contained
    for needle in ("Environment", "torch 2.", "α–β fits", "all_reduce", "Avg bus bandwidth", "ring model"):
        assert needle in page, needle
    md = (run / "report" / "report.md").read_text()
    linked = re.findall(r"\]\(([^)]+\.png)\)", md)
    assert sorted(linked) == sorted(p.name for p in pngs)  # the Markdown links the sibling PNGs
    rows = list(csv.DictReader(io.StringIO((run / "report" / "results.csv").read_text())))
    assert len(rows) == len(recs) and rows[0]["run_id"] and "samples_us" not in rows[0]
    assert {r["variant"] for r in rows} == variants


REPORT_BOUND_BYTES = 8 << 20
"""The fixture's report folder (133 cases, 15 figures: HTML with the figures inside it, the PNGs beside it,
Markdown, CSV) stays under 8 MiB, about twice its size today: a figure grown tenfold, or one drawn per case,
trips it."""


def test_report_size_is_bounded(fixture_report):
    run, _ = fixture_report
    files = [p for p in (run / "report").iterdir() if p.name != "first-screen.png"]  # the browser test's
    total = sum(p.stat().st_size for p in files)
    assert 0 < total < REPORT_BOUND_BYTES, total
    assert (run / "report" / "index.html").stat().st_size < REPORT_BOUND_BYTES // 2


def test_tables_command_still_prints_tables(capsys):
    assert report.main([str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "# all_reduce" in out and "#wrong total: 0 [OK]" in out
    assert report.main(["csv", str(FIXTURE)]) == 0
    assert capsys.readouterr().out.startswith("run_id,experiment,op,")


@pytest.fixture(scope="module")
def mixed_report():
    """Part of the fixture plus records of experiments the report has never heard of: a p2p
    pair matrix (src/dst), a DDP-like table with its own numeric fields, and a LINK_RATE."""
    run = stored_run()
    run["benchmarks"] = [
        b
        for b in run["benchmarks"]
        if b["extra_info"]["variant"] in ("all_reduce", "all_gather_into_tensor", "barrier")
    ]
    tmpl = results.records(run)[0]
    extra = []
    for size in (1024, 8192, 65536):  # three sizes: a line through two cannot fail, so is no link
        for src in range(3):
            for dst in range(3):
                if src != dst:
                    t = 20.0 + size / 1e3 * (1 + (src == 2))  # rank 2's links are slow
                    extra.append(
                        dict(
                            tmpl,
                            experiment="p2p",
                            op="send_recv",
                            variant="ping_pong",
                            src=src,
                            dst=dst,
                            world_size=3,
                            size_bytes=size,
                            time_us=t,
                            p05_us=t * 0.9,
                            p95_us=t * 1.2,
                            algbw_gbps=size / t / 1e3,
                            busbw_gbps=size / t / 1e3,
                            samples_us=[t] * 5,
                        )
                    )
    for m in (1, 2, 4):  # a pipeline: the micro-batch count sets the size, one curve
        t = 100.0 * m
        extra.append(
            dict(
                tmpl,
                experiment="p2p",
                op="send_recv",
                variant="send_recv",
                pattern="pipeline",
                src=-1,
                dst=-1,
                world_size=3,
                size_bytes=m * 4096,
                microbatches=m,
                time_us=t,
                samples_us=[t] * 5,
                iteration=f"{m} micro-batch(es) through 3 stages",
            )
        )
    for ws in (1, 2):
        extra.append(
            dict(
                tmpl,
                experiment="ddp",
                op="train_step",
                variant="ddp",
                table="scaling",
                world_size=ws,
                size_bytes=0,
                time_us=1000.0 * ws,
                samples_per_s=64.0 * ws * 0.9,
                scaling_efficiency=0.9,
                overlap_pct=40.0,
            )
        )
    run["benchmarks"] += [{"extra_info": e} for e in extra]
    run["machine_info"]["suite"]["hosts"]["vm"]["env"]["LINK_RATE"] = "1gbit"
    rep = analysis.build_report(run, "mixed")
    return run, rep, render.render_html(rep)


def test_report_fits_and_ring_model(mixed_report):
    _, rep, page = mixed_report
    ops = {(f.op, f.world_size) for f in rep.fits}
    assert {("all_reduce", 2), ("all_gather", 2)} <= ops
    # the fixture's collective sweeps (1K..64K, 2 ranks on a shared 2-core machine) are latency noise:
    # α–β does not hold there (R² < 0.8), so they imply no link and their rows say so instead of numbers
    two = [f for f in rep.fits if f.world_size == 2]
    assert two and not any(f.fit.shown for f in two) and ("gloo", "cpu", 2) not in rep.links
    head, rows = fit_table.fit_table_rows(rep)
    # no row of dashes per series: nothing here earns a model (the 2-rank sweeps are noise, the pipeline has
    # 3 sizes), and each kind of miss is one line
    assert rows == []
    few, noisy = fit_table.fit_misses(rep)
    assert few == "1 series, no model: too few points (a model needs 4 sizes): p2p: pipeline send_recv (3 ranks)"
    assert noisy.startswith(f"{len(two)} series, no model: too noisy: collectives: all_reduce")
    assert html.escape(noisy) in page
    # 3 ranks: the reference link is the run's link figure, the pair 0<->2 (no window: its ping-pong)
    link = rep.links[("gloo", "cpu", 3)]
    assert "the link's figure: rate p2p ping-pong 0<->2" in link.source and "latency p2p ping-pong 0<->2" in link.source
    # its 3 sizes earn no α–β model: the rate is the median at its largest size, the latency its smallest's time
    assert "too few points" in link.source
    assert (link.alpha_us, link.beta_gbps) == (pytest.approx(21.024), pytest.approx(65536 / (20.0 + 65.536) / 1e3))
    # the one 3-rank fit is the pipeline: t = 100 µs per 4096 B exactly, so α = 0 and β = 4096 B / 100 µs.
    # The least-squares α of exact data is a rounding residue (~1e-14 µs) whose sign depends on the BLAS
    # kernel: negative here (clamped to 0), positive on others; 1e-9 µs is 1e-11 of the 100 µs times
    (pipe,) = [f for f in rep.fits if f.world_size == 3]
    assert (pipe.fit.alpha_us, pipe.fit.beta_gbps, pipe.fit.r2) == (
        pytest.approx(0.0, abs=1e-9),
        pytest.approx(0.04096),
        pytest.approx(1.0),
    )
    assert pipe.fit.n_sizes == 3 and pipe.fit.holds and pipe.link_beta_gbps == pytest.approx(0.04096)
    assert not pipe.fit.shown  # a line through 3 sizes holds, but is no model to show
    # measured / ring at 16 KiB: 400 µs against the send_recv ring (α + S/β) over that link
    assert pipe.ring_ratio == pytest.approx(400.0 / (link.alpha_us + 16384 / (link.beta_gbps * 1e3)))
    for f in rep.fits:
        assert f.ring_ratio is None if f.world_size == 2 else f.ring_ratio > 0
        assert f.rate_ratio is None  # one host ("vm"): LINK_RATE shapes none of its links
    assert rep.link_rate == ("1gbit", pytest.approx(0.125))
    # no fit earns a model here, so no table (nor its LINK_RATE column) stands over no rows; the lines say why
    assert "LINK_RATE (1gbit)" not in page and "ring model" in page


def test_a_sweep_of_two_sizes_is_reported_as_too_few_sizes_not_as_a_fit():
    """A line through two sizes has R² = 1 by construction: the report shows no α, β, R² or link for it,
    draws no fitted line, and says why."""
    run = stored_run()
    run["benchmarks"] = [
        b
        for b in run["benchmarks"]
        if b["extra_info"]["variant"] == "all_reduce" and b["extra_info"]["size_bytes"] in (1024, 65536)
    ]
    rep = analysis.build_report(run, "two sizes")
    assert rep.fits and all(f.fit.n_sizes == 2 and not f.fit.holds for f in rep.fits)
    assert rep.links == {}  # no reference link (and no ring model) from fits that cannot fail
    head, rows = fit_table.fit_table_rows(rep)
    assert rows == []  # no α, β or R² of a line that could not fail
    (miss,) = fit_table.fit_misses(rep)
    assert miss.startswith(f"{len(rep.fits)} series, no model: too few points (a model needs 4 sizes): collectives: ")
    assert miss in render.render_markdown(rep)


def test_report_covers_other_experiments_generically(mixed_report):
    _, rep, page = mixed_report
    titles = [s.title for s in rep.sections]
    assert titles[0] == "collectives" and {"p2p", "ddp"} <= set(titles)
    p2p = next(s for s in rep.sections if s.title == "p2p")
    assert [p.name for p in p2p.plots] == ["p2p-ping-pong-gloo-cpu-3-pairs", "p2p-pipeline-gloo-cpu-3"]
    assert [f.series for f in rep.fits if f.experiment == "p2p"] == ["pipeline send_recv"]  # not one per M
    assert ("gloo", "cpu", 3) in rep.links and "p2p ping-pong" in rep.links[("gloo", "cpu", 3)].source
    ddp = next(s for s in rep.sections if s.title == "ddp")
    # ddp has its own table module (experiments/ddp/table.py), so no generic grid; its bar chart stays
    assert ddp.plots and not ddp.grids
    # p2p and ddp records go through their own table modules (with a generic fallback when
    # hand-made records lack fields); their sections and charts are in the page
    assert "<h2 id='p2p'>p2p</h2>" in page and "<h2 id='ddp'>ddp</h2>" in page
    assert "ddp: scaling" in page


def test_launcher_report_failure_only_warns(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SUITE_REPORT", "1")
    bad = tmp_path / "run"
    bad.mkdir()
    (bad / "bench.json").write_text("{not json")
    launch.write_report(bad)  # must not raise: the bench's exit status is the ranks'
    err = capsys.readouterr().err
    assert "warning: report not written" in err and "python -m suite.report html" in err


# --- the HTML in a real browser ----------------------------------------------------------------


def _render(page: Path, tmp_path: Path, *extra: str) -> tuple[str, str]:
    """Load ``page`` in headless chromium in a FIRST_SCREEN window; return (DOM after load, browser log)
    (``extra``: other switches instead of the DOM's dump, such as a --screenshot=)."""
    r = run_chromium(page, tmp_path, "--enable-logging=stderr", "--v=0", *(extra or ["--dump-dom"]))
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, r.stderr


def _imgcheck(dom: str) -> dict:
    m = re.search(r'<p id="imgcheck"([^>]*)>', dom)
    assert m, "the page's load check did not run"
    return dict(re.findall(r'data-(\w+)="(\d+)"', m.group(1)))


@needs_chromium
def test_compare_page_figure_is_on_the_first_screen_in_a_browser(compare_page, tmp_path):
    """In a FIRST_SCREEN window the comparison page's forest plot ends on the first screen (the browser's own
    layout), every image decodes, no script fails and nothing is fetched from outside its folder."""
    page, _, _ = compare_page
    assert_opens_on(page, tmp_path, "#headline-figure")
    # on a laptop's screen: the verdict, what was compared, the warnings and the forest's top (its ratio axis)
    c = assert_on_small_screen(page, tmp_path, ["#verdict", "#world", ".warning"])
    c = open_page(page, tmp_path, "#headline-figure img", window=SMALL_SCREEN)
    assert 0 <= c.figure["top"] and c.figure["top"] + RATIO_AXIS_PX <= c.height, (c.figure, c.height)


RATIO_AXIS_PX = 90
"""How far down the forest figure its top ratio axis ends: the title, the legend and the tick labels."""


@needs_chromium
def test_html_report_renders_in_headless_browser(fixture_report, tmp_path):
    """Every image decodes, no script fails, the page fetches nothing (it works offline, from its folder),
    and the headline figure ends inside the first screen of a 1400x1800 window."""
    run, _ = fixture_report
    page = run / "report" / "index.html"
    dom, log = _render(page, tmp_path)
    check = _imgcheck(dom)
    n_png = len(list((run / "report").glob("*.png")))
    fold, height = int(check.pop("fold")), int(check.pop("height"))
    assert check == {"total": str(n_png), "bad": "0", "errors": "0", "requests": "0"}, check
    assert 0 < fold <= height <= FIRST_SCREEN[1], (fold, height)  # the viewport: the window less its frame
    console_errors = [ln for ln in log.splitlines() if "CONSOLE" in ln and re.search(r"error|uncaught", ln, re.I)]
    assert not console_errors, console_errors
    # the check itself is not blind: a broken image and a script error are caught
    broken = tmp_path / "broken.html"
    broken.write_text(
        page.read_text().replace(
            "</body>",
            "<img alt='gone' src='https://example.invalid/x.png'><script>undefined_function()</script></body>",
        )
    )
    check = _imgcheck(_render(broken, tmp_path)[0])
    assert check["bad"] == "1" and check["errors"] == "1" and int(check["requests"]) > 0, check
    # and `make screenshot` keeps a picture of the first screen beside the report, as a person sees it
    r = _make("screenshot", f"RUN={run}")
    shot = run / "report" / "first-screen.png"
    assert r.returncode == 0 and f"screenshot: {shot} (the first 1400x1800 pixels of " in r.stdout, r.stderr
    assert shot.read_bytes().startswith(PNG_MAGIC)
    assert matplotlib.image.imread(shot).shape[:2] == (FIRST_SCREEN[1], FIRST_SCREEN[0])


# --- the summary: what the run means, first -------------------------------------------------------


def test_summary_leads_with_what_the_run_means(fixture_report):
    run, _ = fixture_report
    md = (run / "report" / "report.md").read_text()
    # the headline and its figure first, then the summary, the environment and the fits
    assert md.index("- collectives: all_reduce (sum, float32) reaches ") < md.index(
        "![bus bandwidth of every collective"
    )
    assert md.index("![bus bandwidth") < md.index("## Summary") < md.index("## Environment") < md.index("## α–β fits")
    rows = dict(summary.summary_rows(results.load_run(run)))
    assert rows["status"].startswith("complete; exit status 0 (every case ran and was correct)")
    assert "collectives (" in rows["measured"] and "2 ranks on 1 host (" in rows["measured"]
    assert rows["peak all_reduce"].endswith("2 ranks)") and "GB/s busbw at" in rows["peak all_reduce"]
    assert rows["health (doctor)"] == "no health check in this run (make doctor)"
    assert "unstable cases" in rows and "skipped" in rows


def test_summary_groups_skips_by_reason_and_flags_unstable_cases():
    run = json.loads((FIXTURE / "bench.json").read_text())
    recs = results.records(run)
    for r in recs:  # every median known to 1% ...
        r["samples_us"] = [100.0 + 0.1 * i for i in range(20)]
    recs[0]["samples_us"] = [10.0 * (1 + i) for i in range(20)]  # ... but this one's to ±45%
    recs[0].update(p05_us=15.0, p50_us=105.0, p95_us=195.0, label="wild")
    run["suite"]["skipped"] = [
        {"case": f"experiments/placement/cases.py::test_placement[gpu-{i}]", "reason": "no CUDA"} for i in range(3)
    ] + [{"case": "experiments/p2p/cases.py::test_p2p[x]", "reason": "2 ranks"}]
    rows = dict(summary.summary_rows(run))
    assert rows["unstable cases"].startswith(f"1 of {len(recs)}: the median is uncertain by more than ±10%")
    assert "wild ±4" in rows["unstable cases"] and "band 1.7x the median" in rows["unstable cases"]
    assert rows["skipped"] == "4 cases: 3 placement cases: no CUDA; 1 p2p case: 2 ranks"
    rows = dict(summary.summary_rows(run, base=("base", [recs])))
    assert "identical runs" in rows["against base"]  # the run against itself: every case same, nothing to test
    # a base 0.1% off: every case told same but the wild one, which cannot be: within MAX_INCONCLUSIVE
    base = [{**r, "samples_us": [x * 1.001 for x in r["samples_us"]]} for r in recs]
    rows = dict(summary.summary_rows(run, base=("base", [base])))
    assert rows["against base"].startswith("same overall (median case ratio 0.999")
    n = len(recs)
    assert f"{n} matched case(s): 0 slower, 0 faster, {n - 1} same, 1 inconclusive; gate: PASS" in rows["against base"]


@pytest.mark.slow
def test_make_report_has_the_prediction_section_with_the_extrapolation(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    before = _make("-s", "report", f"RUN={run}")
    assert before.returncode == 0, before.stderr
    md = (run / "report" / "report.md").read_text()
    assert "## prediction at scale" in md and "make predict RUN=<run>" in md  # no predict.json yet: says how
    assert _make("-s", "predict", f"RUN={run}", "RANKS=64", "RANKS_PER_NODE=8").returncode == 0
    after = _make("-s", "report", f"RUN={run}")
    assert after.returncode == 0, after.stderr
    md = (run / "report" / "report.md").read_text()
    section = md[md.index("## prediction at scale") :]
    assert "extrapolation to 64 ranks (8 per node)" in section and "ring *" in section
    assert "all_reduce           2          1K        ring" in section  # measured vs predicted at the run's scale
    page = (run / "report" / "index.html").read_text()
    assert "<h2 id='prediction'>prediction at scale</h2>" in page and "extrapolation to 64 ranks" in page


def test_link_rate_ratio_only_for_series_that_cross_hosts():
    """LINK_RATE shapes the links between hosts: a one-host series (loopback) compared with it read as
    "266x the link rate" once. Its ratio is "-"; the same records marked as spanning two hosts get one."""
    run = copy.deepcopy(stored_run())
    run["machine_info"]["suite"]["hosts"] = {"node0": {"env": {"LINK_RATE": "1gbit"}}}
    rep = analysis.build_report(run, "one-host")
    assert rep.link_rate and rep.fits
    assert all(f.rate_ratio is None for f in rep.fits)
    head, rows = fit_table.fit_table_rows(rep)
    col = head.index("link β / LINK_RATE (1gbit)")
    assert {r[col] for r in rows} <= {"-"}
    for b in run["benchmarks"]:
        b["extra_info"]["hosts"] = 2
    rep2 = analysis.build_report(run, "two-hosts")
    rated = [f for f in rep2.fits if f.link_beta_gbps]
    assert rated and all(f.rate_ratio == pytest.approx(f.link_beta_gbps / 0.125) for f in rated)


def test_tail_latencies_of_too_few_samples_are_not_shown_and_the_count_is():
    """The fixture's records hold 10 samples each (and, stored before the rule, a p95 of them: the
    sample maximum): tables, grids and the summary give the count instead of a tail latency."""
    from suite.report.tables import generic_table

    recs = [r for r in results.records(stored_run()) if r["variant"] == "all_reduce"][:2]
    assert all(r["p95_us"] is not None and len(r["samples_us"]) == 10 for r in recs)
    lines = generic_table("t", recs).splitlines()[2:]
    assert [line.split()[4] for line in lines] == ["n=10", "n=10"]
    head, rows = sections._grid("g", recs)
    assert {row[head.index("p95_us")] for row in rows} == {"- (n=10)"}
    assert {row[head.index("iterations")] for row in rows} == {"10"}
    wild = dict(recs[0], samples_us=[10.0 * (1 + i) for i in range(10)], p50_us=55.0, min_us=10.0, max_us=100.0)
    assert summary._spread_text(wild) == "min-max 1.6x the median (10 samples, too few for a p95)"


def test_a_reference_links_latency_reads_in_a_unit_a_person_reads(mixed_report):
    """A slow link's α (1.5 ms here) reads "1.5 ms" in the report's link note and ring model, not "1.5e+03 µs"."""
    import dataclasses

    _, rep, _ = mixed_report
    key = ("gloo", "cpu", 3)
    slow = dataclasses.replace(rep, links={**rep.links, key: dataclasses.replace(rep.links[key], alpha_us=1500.0)})
    page, md = render.render_html(slow), render.render_markdown(slow)
    assert "α = 1.5 ms" in page and "α = 1.5 ms" in md
    assert "e+0" not in page.split("Reference link", 1)[1][:200]
