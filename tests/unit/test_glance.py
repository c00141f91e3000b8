"""What opens a report (suite/report/glance.py and the experiments' glance hooks), from stored runs: the
headline figure's lines and its "% of link rate" table, and each experiment's first picture or the line
that says why it has none."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from suite import results
from suite.report import glance
from suite.report.headline import link_reference
from suite.report.sections import PlotNames

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def all_run() -> dict:
    return results.load_run(FIXTURES / "all-gloo-2")


@pytest.fixture(scope="module")
def all_glance(all_run) -> glance.Glance:
    """The glance of every experiment's run (drawn once: the figures are what costs)."""
    return glance.build_glance(all_run, {}, PlotNames())


def test_one_line_per_collective_its_canonical_form_at_each_size(all_run):
    lines = dict(glance.collective_lines(all_run))
    recs = [r for r in results.records(all_run) if r["experiment"] == "collectives"]
    ops = {r["op"] for r in recs if r.get("busbw_gbps") and r["size_bytes"]} - {"barrier"}
    assert set(lines) == ops  # one line per op, labelled by it alone (one backend, device and world size)
    for op, line in lines.items():
        sizes = [r["size_bytes"] for r in line]
        assert sizes == sorted(set(sizes))
        assert all(r["op"] == op and r.get("dtype") == "float32" for r in line)
        assert all(r.get("redop") in (None, "none", "sum") for r in line)  # never the luckiest reduction
    assert lines["all_reduce"][-1]["redop"] == "sum"


def test_the_table_gives_each_collectives_share_of_the_links_rate(all_run, all_glance):
    g = all_glance
    assert g.headlines and g.headlines[0].startswith("collectives: ")
    assert g.figure is not None and g.figure.name == "headline-busbw"
    lines = dict(glance.collective_lines(all_run))
    assert [row[0] for row in g.link_rows] == list(lines)
    for line, row in zip(lines.values(), g.link_rows):
        link = link_reference(all_run, line[-1])
        assert link is not None and link.measured  # the run's own streaming probe
        assert row[2] == f"{line[-1]['busbw_gbps']:z.3g}"
        assert row[3].startswith(f"{line[-1]['busbw_gbps'] / link.beta_gbps:z.0%}")
    assert "measured: " in g.caption and "p2p window 0->1" in g.caption


def test_without_a_link_rate_the_caption_says_so_and_the_share_is_a_dash(all_run):
    run = copy.deepcopy(all_run)
    run["benchmarks"] = [b for b in run["benchmarks"] if b["extra_info"]["experiment"] == "collectives"]
    g = glance.build_glance(run, {}, PlotNames())
    assert {row[3] for row in g.link_rows} == {"-"}
    assert "no link rate to set it against" in g.caption


def test_each_experiment_shows_its_first_picture_or_says_why_not(all_glance):
    g = all_glance
    captions = [c for _, c in g.pictures]
    pictures = dict((c.split(":")[0], p) for p, c in g.pictures)
    # backends: one lane, so no ratio to draw; placement: no CUDA, so no copy rates
    assert pictures["backends"] is None and any(c.startswith("backends: only gloo/cpu ran") for c in captions)
    assert pictures["placement"] is None and any("no copy rates in this run" in c for c in captions)
    # ddp: the stacked bars of the step, beside the bytes per step against plain DDP's
    assert pictures["ddp"] is not None and pictures["ddp"].title.startswith("ddp: where the step's time goes")
    assert any(c.startswith("ddp: each way of synchronising") for c in captions)
    assert "collectives" not in pictures  # the headline figure is its picture


def test_sharded_shows_the_decomposition_beside_the_bytes_against_ddp():
    run = results.load_run(FIXTURES / "sharded-gloo-2")
    g = glance.build_glance(run, {}, PlotNames())
    ((plot, caption),) = [(p, c) for p, c in g.pictures if c.startswith("sharded:")]
    assert plot is not None and plot.name == "sharded-glance" and "against DDP's" in caption


def _lane_records(lane_times: dict[str, list[float]]) -> list[dict]:
    return [
        {"experiment": "backends", "table": "compare", "op": "all_reduce", "lane": lane, "backend": lane,
         "device": "cpu", "size_bytes": 1024 << i, "time_us": t}
        for lane, times in lane_times.items()
        for i, t in enumerate(times)
    ]  # fmt: skip


def test_backends_draws_each_lanes_time_over_the_first_lanes():
    from experiments.backends import report

    pic = report.glance({}, _lane_records({"gloo/cpu": [10.0, 20.0], "mpi/cpu": [5.0, 40.0]}))
    assert pic.png.startswith(PNG_MAGIC) and "against gloo/cpu" in pic.caption
    one = report.glance({}, _lane_records({"gloo/cpu": [10.0, 20.0]}))
    assert one.png is None and one.caption.startswith("backends: only gloo/cpu ran")


def test_placement_draws_copy_rates_under_their_ceilings():
    from experiments.placement import report

    recs = [
        {"table": "copy", "direction": d, "host_memory": m, "size_bytes": s, "algbw_gbps": g,
         "bytes_moved_factor": 2 if d == "d2d" else 1, "nominal_peak_gbps": 3000.0 if d == "d2d" else 25.0}
        for d, m in (("h2d", "pinned"), ("d2d", "device"))
        for s, g in ((1 << 20, 5.0), (1 << 24, 20.0))
    ]  # fmt: skip
    pic = report.glance({}, recs)
    assert pic.png.startswith(PNG_MAGIC) and "PCIe" in pic.caption


def test_an_own_sections_first_figure_opens_the_report_once(monkeypatch):
    """The doctor's glance hook draws the figure its section starts with (the link matrices): the page carries
    it once, the section pointing up to it. Without the hook, the section's first figure opens the report."""
    import base64

    from suite.report import render
    from suite.report.analysis import build_report

    rep = build_report(results.load_run(FIXTURES / "doctor-gloo-2"), "doctor")
    ((plot, caption),) = rep.glance.pictures
    assert plot.name == "doctor-glance" and caption.startswith("doctor: inconclusive: no finding")
    page = render.render_html(rep)
    assert page.count(base64.b64encode(plot.png).decode()) == 1
    section_plot = next(s for s in rep.sections if s.anchor == "doctor").plots[0]
    assert section_plot.png == plot.png
    assert f"<a href='#fig-{plot.name}'>{section_plot.title}: the figure above</a>" in page

    real = glance.spec_value
    monkeypatch.setattr(
        glance, "spec_value", lambda exp, key, default: None if key == "glance" else real(exp, key, default)
    )
    rep = build_report(results.load_run(FIXTURES / "doctor-gloo-2"), "doctor")
    ((plot, caption),) = rep.glance.pictures
    assert plot.name == "doctor-links" and caption.endswith("(the first figure of its section)")


def test_a_curve_that_falls_beyond_its_intervals_is_marked_as_noise_not_drawn_as_a_feature(all_run):
    run = copy.deepcopy(all_run)
    ops = ("all_reduce", "broadcast")
    recs = [b["extra_info"] for b in run["benchmarks"] if b["extra_info"]["experiment"] == "collectives"]
    recs = [r for r in recs if r["op"] in ops and r["size_bytes"] == 1024]
    run["benchmarks"] = []
    for r in recs:
        for size in (1024, 2048):
            e = dict(r, size_bytes=size)
            t = 400.0 if (e["op"], size) == ("all_reduce", 2048) else 100.0  # all_reduce: 4x slower at 2 KiB
            e.pop("precision_ci_pct", None)
            e["samples_us"] = [t * (1 + k / 1000) for k in range(-10, 11)]  # a median known to about 1%
            e["time_us"], e["busbw_gbps"] = t, size / (t * 1e3)
            run["benchmarks"].append({"extra_info": e})
    g = glance.build_glance(run, {}, PlotNames())
    assert "Noise, not a feature: all_reduce falls at 2.0 KiB" in g.caption
    assert "broadcast falls" not in g.caption  # its rate doubles with the size: monotonic
