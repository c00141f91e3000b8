"""One rate per link (suite/model/link_rate.py ``link_figures``): a stored run's headline, its "% of link rate"
column, the fits' reference link and the ring model drawn with it, the doctor's expectation and the
predictions all read the same per-link figure. Record-shaped runs built from a stored record of each kind
(tests/fixtures/all-gloo-2), their times on known α–β lines."""

from __future__ import annotations

import copy

import pytest

from suite import results
from suite.model import link_rate
from suite.model.calibrate import p2p_links
from suite.model.fit import Link, ring_time_us
from suite.report import analysis, fit_table, glance
from suite.report.headline import headline_items
from tests.conftest import ROOT

SIZES = [1 << k for k in range(10, 21, 2)]  # 1 KiB .. 1 MiB, 6 sizes
"""The sweep every probe and the collectives run here."""


@pytest.fixture(scope="module")
def templates() -> dict:
    """One stored record per kind: the collectives' all_reduce, the p2p window (each way) and ping-pong."""
    recs = results.records(results.load_run(ROOT / "tests" / "fixtures" / "all-gloo-2"))

    def first(**kw):
        return next(r for r in recs if all(r.get(k) == v for k, v in kw.items()))

    return {
        "all_reduce": first(experiment="collectives", op="all_reduce", redop="sum"),
        "window": first(pattern="window", variant="unidirectional"),
        "bidirectional": first(pattern="window", variant="bidirectional"),
        "pingpong": first(pattern="pingpong"),
    }


def _on_line(tmpl: dict, size: int, alpha_us: float, beta_gbps: float, factor: float = 1.0, **kw) -> dict:
    """The template at ``size`` with its time on the line α + S/β (``factor``: busbw per algbw)."""
    t = alpha_us + size / (beta_gbps * 1e3)
    rec = copy.deepcopy(tmpl)
    rec.update(kw, size_bytes=size, count=size // 4, time_us=t, samples_us=[t] * 7, iterations=7)
    rec.update(algbw_gbps=size / (t * 1e3), busbw_gbps=factor * size / (t * 1e3))
    for k in ("p05_us", "p50_us", "p95_us", "p99_us", "min_us", "max_us", "mean_us"):
        rec[k] = t
    return rec


def _run(templates: dict, hosts=("h0", "h0"), expect: str = "") -> dict:
    """2 ranks: a window of 1 MiB messages at 2 GB/s (α 5 µs), both ways at 1.5 GB/s each, one message at a time
    (ping-pong) far slower (α 50 µs, 0.8 GB/s), and all_reduce at busbw 1.2 GB/s (α 100 µs)."""
    recs = []
    for s in SIZES:
        recs.append(_on_line(templates["window"], s, 5.0, 2.0))
        recs.append(_on_line(templates["bidirectional"], s, 8.0, 1.5))
        recs.append(_on_line(templates["pingpong"], s, 50.0, 0.8))
        recs.append(_on_line(templates["all_reduce"], s, 100.0, 1.2, in_place=False))
    return {
        "benchmarks": [{"extra_info": r} for r in recs],
        "machine_info": {"suite": {"hostnames": list(hosts), "hosts": {h: {"env": {}} for h in set(hosts)}}},
        "suite": {"config": {"doctor": {"expect_link_rate": expect}}},
    }


def test_the_link_figure_is_the_streaming_probes_fitted_rate_and_the_same_pairs_latency(templates):
    (fig,) = link_rate.link_figures(_run(templates)).values()
    assert (fig.src, fig.dst, fig.link_class, fig.measured) == (0, 1, "intra", True)
    assert fig.beta_gbps == pytest.approx(2.0, rel=1e-6)  # the window's β, not the ping-pong's 0.8
    assert fig.alpha_us == pytest.approx(50.0, rel=1e-6)  # the one-way latency of the same pair
    assert "p2p window 0->1 up to 1 MiB, levelled off, α–β fit" in fig.source
    assert "p2p ping-pong 0<->1" in fig.alpha_source
    assert (fig.sizes, fig.n_sizes, fig.saturated) == ((1024, 1 << 20), 6, True)
    assert fig.both_gbps == pytest.approx(3.0, rel=1e-6)


def test_the_figure_says_how_far_the_link_probe_went_beyond_the_sweep(templates):
    """The link probe's steps beyond MAX_BYTES (their ``link_probe`` record, the last one's verdict) are the
    window's largest sizes: the figure fits them and says how far it went and why it stopped."""
    run = _run(templates)
    for k, s in enumerate((4 << 20, 16 << 20), start=1):
        last = k == 2
        probe = {"beyond_max_bytes": True, "step": k, "why": "levelled off" if last else None}
        rec = _on_line(templates["window"], s, 5.0, 2.0, table="link_probe", beyond_sweep=True, link_probe=probe)
        run["benchmarks"].append({"extra_info": rec})
    (fig,) = link_rate.link_figures(run).values()
    assert "p2p window 0->1 up to 16 MiB, levelled off, α–β fit" in fig.source
    assert fig.sizes == (1024, 16 << 20) and fig.beta_gbps == pytest.approx(2.0, rel=1e-6)
    run["benchmarks"][-1]["extra_info"]["link_probe"] = {**probe, "why": "time bound"}
    (fig,) = link_rate.link_figures(run).values()
    assert "up to 16 MiB, time bound" in fig.source


def test_a_sweep_still_growing_without_a_probe_says_so(templates):
    run = _run(templates)
    for b in run["benchmarks"]:  # a slower link: α 500 µs at 2 GB/s is still growing at 1 MiB
        r = b["extra_info"]
        if r.get("pattern") == "window" and r["variant"] == "unidirectional":
            b["extra_info"] = _on_line(r, r["size_bytes"], 500.0, 2.0)
    (fig,) = link_rate.link_figures(run).values()
    assert "p2p window 0->1 up to 1 MiB, still growing (+" in fig.source and "no probe beyond the sweep" in fig.source


def test_headline_fit_table_ring_model_doctor_and_predictions_read_one_figure(templates):
    from experiments.doctor.verdict import expectation

    run = _run(templates)
    (fig,) = link_rate.link_figures(run).values()
    (col,) = [h for h in headline_items(run) if h.experiment == "collectives"]
    busbw = SIZES[-1] / (100.0 + SIZES[-1] / 1.2e3) / 1e3  # 1.08 GB/s at 1 MiB
    assert col.numbers["link_gbps"] == fig.beta_gbps
    assert "54% of the link's measured rate (2 GB/s" in col.text  # busbw / 2, not / 0.8 (135%)

    rep = analysis.build_report(run, "one link")
    ref = rep.links[("gloo", "cpu", 2)]
    assert (ref.alpha_us, ref.beta_gbps) == (fig.alpha_us, fig.beta_gbps)
    (row,) = [f for f in rep.fits if f.op == "all_reduce"]
    at_max = Link(alpha_us=fig.alpha_us, beta_gbps=fig.beta_gbps, source="")
    t_max = 100.0 + SIZES[-1] / 1.2e3
    assert row.ring_ratio == pytest.approx(t_max / ring_time_us("all_reduce", 2, at_max, SIZES[-1]))
    head, rows = fit_table.fit_table_rows(rep)
    (cells,) = [r for r in rows if "all_reduce" in r[1]]
    assert cells[head.index("measured / ring at max size")] == f"{row.ring_ratio:z.2f}"

    (line_row,) = [r for r in rep.glance.link_rows if r[0] == "all_reduce"]
    assert line_row[3] == f"{busbw / fig.beta_gbps:z.0%}" == "54%"
    assert p2p_links(run)["intra"].beta_gbps == fig.beta_gbps  # the predictions' link
    assert p2p_links(run)["intra"].alpha_us == fig.alpha_us
    assert expectation(run, []) is None  # one host, nothing declared: the doctor compares links in their class


def test_across_hosts_the_declared_rate_is_every_readers_link(templates):
    from experiments.doctor.verdict import expectation

    run = _run(templates, hosts=("h0", "h1"), expect="16gbit")  # 2 GB/s declared
    (fig,) = link_rate.link_figures(run).values()
    assert (fig.link_class, fig.measured, fig.beta_gbps) == ("inter", False, 2.0)
    assert fig.source.startswith("EXPECT_LINK_RATE=16gbit (measured: 2 GB/s")
    assert expectation(run, [])["gbps"] == fig.beta_gbps
    (col,) = [h for h in headline_items(run) if h.experiment == "collectives"]
    assert col.numbers["link_gbps"] == fig.beta_gbps and "of the link's declared rate" in col.text
    rep = analysis.build_report(run, "declared")
    assert rep.links[("gloo", "cpu", 2)].beta_gbps == fig.beta_gbps
    assert p2p_links(run)["inter"].beta_gbps == fig.beta_gbps


def test_a_share_above_the_link_is_never_a_bare_percentage_in_the_table(templates):
    run = _run(templates)
    for b in run["benchmarks"]:
        e = b["extra_info"]
        if e["op"] == "all_reduce":
            e["busbw_gbps"] *= 2.2  # 2.37 GB/s at 1 MiB: above one direction (2 GB/s), within both (3 GB/s)
    rows = glance.build_glance(run, {}, analysis.PlotNames()).link_rows
    (cell,) = [r[3] for r in rows if r[0] == "all_reduce"]
    assert cell == "118% of one direction (79% of both)", cell


def test_a_probe_too_noisy_for_a_model_gives_its_largest_sizes_rate_and_says_why(templates):
    run = _run(templates)
    wiggle = [1.0, 3.0, 0.4, 2.5, 0.5, 1.0]  # the window's times, off the line by up to 3x
    window = [b["extra_info"] for b in run["benchmarks"] if b["extra_info"].get("variant") == "unidirectional"]
    for rec, w in zip(sorted(window, key=lambda r: r["size_bytes"]), wiggle):
        rec["time_us"] *= w
    (fig,) = link_rate.link_figures(run).values()
    assert "the median rate at its largest size (no α–β model: too noisy" in fig.source
    assert fig.beta_gbps == pytest.approx(SIZES[-1] / (5.0 + SIZES[-1] / 2e3) / 1e3)
    assert fig.reached is None and fig.saturated  # no model: nothing extrapolated


def test_each_link_class_has_one_figure_the_window_for_its_own_and_a_ping_pong_for_the_other(templates):
    # 4 ranks on 2 hosts: the window crosses hosts (0 -> 3); within a host only the ping-pong 0 <-> 1 ran
    recs = []
    for s in SIZES:
        recs.append(_on_line(templates["window"], s, 5.0, 2.0, src=0, dst=3, world_size=4))
        recs.append(_on_line(templates["pingpong"], s, 50.0, 0.8, src=0, dst=3, world_size=4))
        recs.append(_on_line(templates["pingpong"], s, 10.0, 4.0, src=0, dst=1, world_size=4))
    run = {
        "benchmarks": [{"extra_info": r} for r in recs],
        "machine_info": {"suite": {"hostnames": ["a", "a", "b", "b"], "hosts": {"a": {"env": {}}, "b": {"env": {}}}}},
    }
    figs = link_rate.class_figures(run)
    inter, intra = figs[("gloo", "cpu", 4, "inter")], figs[("gloo", "cpu", 4, "intra")]
    assert (inter.src, inter.dst, inter.beta_gbps) == (0, 3, pytest.approx(2.0, rel=1e-6))
    assert (intra.src, intra.dst, intra.beta_gbps) == (0, 1, pytest.approx(4.0, rel=1e-6))
    assert "no streaming probe of this link class" in intra.source
    assert link_rate.link_figures(run) == {("gloo", "cpu", 4): inter}  # what the headline sets busbw against
    links = p2p_links(run)
    assert (links["inter"].beta_gbps, links["intra"].beta_gbps) == (inter.beta_gbps, intra.beta_gbps)
