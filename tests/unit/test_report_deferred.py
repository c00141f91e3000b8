"""A report's figures are rasterized together, in forked workers where CPUs allow
(suite/report/plots.py ``deferred``): the PNGs are the ones drawn one by one, whatever the workers do."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from suite.report import plots
from suite.report.render import write_report

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "all-gloo-2"
PNG = b"\x89PNG\r\n\x1a\n"


def _figures() -> list[bytes]:
    return [plots.bar_plot(f"t{i}", ["a", "b", "c"], [("ms", [1.0 + i, 2.0, 3.0], None)]) for i in range(5)]


def test_deferred_figures_are_the_ones_drawn_one_by_one():
    direct = _figures()
    assert all(p.startswith(PNG) for p in direct)
    for workers in (1, 2, 3):
        with plots.deferred(workers) as pngs:
            tokens = _figures()
            assert not any(t.startswith(PNG) for t in tokens) and len(set(tokens)) == 5  # placeholders
        assert [pngs[t] for t in tokens] == direct
    assert _figures() == direct  # outside the block: bytes again


def test_a_worker_that_dies_leaves_its_figures_to_the_parent(monkeypatch):
    direct = _figures()
    monkeypatch.setattr(plots, "_render_share", lambda figs, share, send: os._exit(3))  # the forked child dies
    with plots.deferred(2) as pngs:
        tokens = _figures()
    assert [pngs[t] for t in tokens] == direct


def test_a_worker_that_never_answers_is_ended_and_its_figures_drawn_here(monkeypatch):
    import time

    direct = _figures()
    monkeypatch.setattr(plots, "WORKER_LIMIT_S", 0.5)
    monkeypatch.setattr(plots, "_render_share", lambda figs, share, send: time.sleep(60))  # a stuck child
    t0 = time.monotonic()
    with plots.deferred(2) as pngs:
        tokens = _figures()
    assert [pngs[t] for t in tokens] == direct and time.monotonic() - t0 < 30  # not the child's 60 s


def test_stuck_workers_share_one_deadline(monkeypatch):
    """Three stuck workers cost the report one WORKER_LIMIT_S, not three in turn: the parent's waits on them add
    up to at most one limit (the old code waited a whole limit on each). The waits are read, not timed."""
    import multiprocessing.connection as mpc
    import time

    direct = _figures()
    waits, poll = [], mpc.Connection.poll

    def counted(conn, timeout=0.0):
        waits.append(timeout)
        return poll(conn, timeout)

    monkeypatch.setattr(mpc.Connection, "poll", counted)
    monkeypatch.setattr(plots, "WORKER_LIMIT_S", 0.5)
    monkeypatch.setattr(plots, "_render_share", lambda figs, share, send: time.sleep(60))
    with plots.deferred(4) as pngs:
        tokens = _figures()
    assert [pngs[t] for t in tokens] == direct
    assert len(waits) == 3 and sum(waits) <= plots.WORKER_LIMIT_S


def test_a_worker_whose_drawing_fails_leaves_its_figures_to_the_parent(monkeypatch):
    direct = _figures()
    real, parent = plots._rasterize, os.getpid()

    def fails_in_a_child(fig):
        if os.getpid() != parent:
            raise RuntimeError("planted")
        return real(fig)

    monkeypatch.setattr(plots, "_rasterize", fails_in_a_child)
    with plots.deferred(2) as pngs:
        tokens = _figures()
    assert [pngs[t] for t in tokens] == direct


def test_the_written_report_holds_every_figure_as_a_png(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    html = write_report(run).read_text()
    written = sorted((run / "report").glob("*.png"))
    assert written and all(p.read_bytes().startswith(PNG) for p in written)
    assert "suite: deferred figure" not in html and html.count("data:image/png;base64,") >= len(written)
