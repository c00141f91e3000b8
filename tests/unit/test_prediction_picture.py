"""Predicted against measured (suite/report/prediction_plot.py), read from the figure it draws: the band the
model aims at, the bandwidth-bound sizes filled and the latency-bound ones hollow; and the lines that say
whether the predictions hold (the validation page's, suite.model.validate.verdict_line; the report's,
report_section.held_line)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suite import results
from suite.model import document, report_section
from suite.model.run_model import fit_runs
from suite.model.validate import TARGET, validate, verdict_line
from suite.report.prediction_plot import prediction_figure
from suite.report.validation_page import validation_series

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "collectives-gloo-2"


def _row(op: str, size: int, error: float, bound: bool) -> dict:
    return {"op": op, "size_bytes": size, "measured_us": 100.0 * size, "predicted_us": 100.0 * size * (1 + error),
            "error": error, "bandwidth_bound": bound}  # fmt: skip


def _validation(rows: list[dict], **steps) -> dict:
    from suite.model.units import geomean_abs

    summary = {}
    for op in dict.fromkeys(r["op"] for r in rows):
        bw = [r["error"] for r in rows if r["op"] == op and r["bandwidth_bound"]]
        summary[op] = {"geomean_abs_error_bandwidth_bound": geomean_abs(bw)}
    return {"fit_ranks": [2, 3], "rows": rows, "summary": summary, **steps}


def test_the_line_says_whether_the_bandwidth_bound_predictions_hold():
    held = _validation([_row("all_reduce", 1, 0.5, False), _row("all_reduce", 2, 0.05, True)])
    assert verdict_line(held) == (
        "Predictions hold: bandwidth-bound sizes of all_reduce 5.0% (geomean |error|), within the ±10% target; "
        "latency-bound sizes (not held to it): 50%."
    )
    missed = _validation([_row("all_reduce", 2, -0.05, True), _row("all_gather", 2, 0.3, True)])
    assert verdict_line(missed).startswith(
        "Predictions miss the ±10% target: bandwidth-bound sizes of all_gather 30.0% (geomean |error|); "
        "within it: all_reduce 5.0%"
    )
    none = _validation([_row("broadcast", 1, 0.2, False)], ddp=[{}], ddp_summary={"geomean_abs_error": 0.12})
    assert verdict_line(none) == (
        "Nothing here to hold to the ±10% target: no size of these runs is bandwidth-bound; latency-bound sizes "
        "(not held to it): 20%; training steps: ddp step 12%."
    )


def test_the_figure_fills_what_the_target_holds_to_inside_its_band():
    v = _validation(
        [_row("all_reduce", 1, 0.5, False), _row("all_reduce", 2, 0.05, True), _row("all_reduce", 4, -0.02, True)],
        ddp=[{"measured_us": 50.0, "predicted_us": 60.0}],
        ddp_summary={"geomean_abs_error": 0.2},
    )
    fig = prediction_figure("t", validation_series(v), TARGET)
    (ax,) = fig.axes
    drawn = {c.get_gid(): c for c in ax.collections if c.get_gid()}
    assert len(drawn["held:all_reduce"].get_offsets()) == 2 and len(drawn["loose:all_reduce"].get_offsets()) == 1
    assert drawn["loose:all_reduce"].get_facecolors().size == 0  # hollow
    assert len(drawn["held:ddp step"].get_offsets()) == 1
    band = drawn["band"].get_paths()[0].vertices
    x = band[:, 0]
    ratios = band[:, 1] / np.where(x > 0, x, 1)
    assert ratios.min() == pytest.approx(1 - TARGET) and ratios.max() == pytest.approx(1 + TARGET)


def test_the_reports_line_at_the_runs_own_scale():
    scale = document.measured_scale(fit_runs([results.load_run(FIXTURE)]))
    assert scale and all(isinstance(r["bandwidth_bound"], bool) for r in scale)
    line = report_section.held_line(scale, TARGET)
    assert line.startswith("At the run's own scale (in-sample: the links were fitted on these points), ")
    rows = [{"error": 0.02, "bandwidth_bound": True}, {"error": 0.3, "bandwidth_bound": True},
            {"error": 0.5, "bandwidth_bound": False}]  # fmt: skip
    # the target is on the geomean (as the validation's): one size off by 30% among good ones still holds
    assert report_section.held_line(rows, TARGET).endswith(
        "the model holds: 1 of 2 bandwidth-bound sizes within ±10% (geomean |error| 7.7%); "
        "latency-bound sizes (not held to it): 50%."
    )


def test_python_m_suite_report_validation_writes_the_page_of_a_stored_validation(tmp_path, capsys):
    import json

    from suite.report import cli

    stored = tmp_path / "validate-predict-1p.json"
    run = results.load_run(FIXTURE)
    stored.write_text(json.dumps(validate([run], [run])))
    assert cli.main(["validation", str(stored)]) == 0
    page = stored.with_suffix(".html")
    assert capsys.readouterr().out == f"page: {page}\n"
    assert "<figure id='headline-figure'>" in page.read_text() and stored.with_suffix(".png").stat().st_size > 0
    stored.write_text("{}")
    for bad in (stored, tmp_path / "missing.json"):
        assert cli.main(["validation", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
