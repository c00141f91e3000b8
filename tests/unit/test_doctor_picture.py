"""The doctor's first picture (experiments/doctor/picture.py), read from the figure it draws: the finding
outlined where it is (a slow link's cell, a weak node's rows), the straggler's bar in red under the matrices,
and a caption that names what the picture shows; nothing outlined when healthy."""

from __future__ import annotations

import pytest
from matplotlib.colors import to_rgba
from matplotlib.patches import Rectangle

from experiments.doctor import picture, verdict
from suite.report import rank_plots
from tests.helpers.doctor_runs import THREE_NODES, doctor_run


def _drawn(run: dict, monkeypatch) -> tuple:
    """(the picture, the Figure behind its PNG)."""
    figs = []
    monkeypatch.setattr(rank_plots, "figure_png", lambda fig: figs.append(fig) or b"png")
    pic = picture.picture(run, verdict.diagnose(run))
    (fig,) = figs
    return pic, fig


def _outlines(fig) -> dict[str, Rectangle]:
    return {p.get_gid(): p for ax in fig.axes for p in ax.patches if (p.get_gid() or "").startswith(("slow", "block"))}


def _bars(fig) -> dict[int, tuple]:
    return {int(p.get_gid()[5:]): p.get_facecolor() for ax in fig.axes for p in ax.patches
            if (p.get_gid() or "").startswith("rank:")}  # fmt: skip


def test_a_slow_link_is_boxed_in_its_cell_and_named(monkeypatch):
    run = doctor_run(THREE_NODES, slow=lambda p, a, b, k: 4.0 if (p, a, b) == ("bandwidth", 1, 3) else 1.0)
    pic, fig = _drawn(run, monkeypatch)
    boxes = _outlines(fig)
    assert list(boxes) == ["slow:bandwidth:1->3"]
    assert boxes["slow:bandwidth:1->3"].get_xy() == pytest.approx((3 - 0.45, 1 - 0.45))  # column 3, row 1
    assert pic.caption.startswith("doctor: slow link 1 (node0) -> 3 (node1) [bandwidth, inter-node]")
    assert "boxed in red" in pic.caption and "bars" not in pic.caption
    assert not _bars(fig)  # no straggler: no bars


def test_a_weak_node_has_its_rows_framed(monkeypatch):
    run = doctor_run(THREE_NODES, slow=lambda p, a, b, k: 4.0 if p == "bandwidth" and a in (4, 5) and b < 4 else 1.0)
    pic, fig = _drawn(run, monkeypatch)
    frame = _outlines(fig)["block:bandwidth:rows"]
    assert (frame.get_y(), frame.get_height(), frame.get_width()) == (3.5, 2.0, 6)  # rows 4-5, every column
    assert "weak node node2" in pic.caption and "rows (what it sends)" in pic.caption


def test_a_straggler_has_its_bar_in_red_under_the_matrices(monkeypatch):
    pic, fig = _drawn(doctor_run(THREE_NODES, rank_slow=lambda r: 1.5 if r == 3 else 1.0, noise=0.05), monkeypatch)
    bars = _bars(fig)
    assert sorted(bars) == list(range(6))
    assert [r for r, c in bars.items() if c[:3] == to_rgba(rank_plots.FLAG)[:3]] == [3]
    assert not _outlines(fig)
    assert (
        pic.caption.startswith("doctor: straggler rank 3 (node1)") and "rank 3 in red in the bars below" in pic.caption
    )


def test_a_late_rank_is_shown_by_its_communication_probe(monkeypatch):
    run = doctor_run(THREE_NODES, late_us=lambda r: 1000.0 if r == 4 else 0.0, noise=0.05)
    d = verdict.diagnose(run)
    bars = picture.straggler_bars([b["extra_info"] for b in run["benchmarks"]], d)
    assert bars.title.startswith("all_reduce-") and list(bars.flagged) == [4]
    assert max(range(6), key=lambda r: bars.values_us[r]) == 4  # its own time: the others' wait for it removed


def test_healthy_outlines_nothing_and_says_so(monkeypatch):
    pic, fig = _drawn(doctor_run(THREE_NODES, noise=0.05), monkeypatch)
    assert not _outlines(fig) and not _bars(fig)
    assert pic.caption.startswith("doctor: healthy:") and "would be boxed in red" in pic.caption
    assert picture.glance({"benchmarks": [], "machine_info": {}}, []) is None  # no probes: no picture


def test_inconclusive_says_what_could_hide_and_outlines_nothing(monkeypatch):
    pic, fig = _drawn(doctor_run(THREE_NODES, noise=0.25), monkeypatch)
    assert not _outlines(fig)
    assert (
        pic.caption.startswith("doctor: inconclusive: no finding, but ")
        and "could hide in this run's noise" in pic.caption
    )
    assert pic.title.endswith(", inconclusive")
