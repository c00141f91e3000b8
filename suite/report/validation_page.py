"""The page of ``make validate-predict`` (``python -m suite.report validation FILE.json``, FILE.json written by
``python -m suite.model validate --out``): beside the JSON, ``FILE.html`` opens on every prediction against its
measurement with the error band the model aims at and one line saying whether the predictions hold
(suite.model.validate.verdict_line), then the validation table; ``FILE.png`` is the figure alone. Reads the
validation document only."""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

from suite.model.validate import TARGET, format_validation, verdict_line
from suite.report.prediction_plot import Series, prediction_png
from suite.report.page import standalone_page

TITLE = "predicted against measured: the check runs, from links fitted on the fit runs"


def validation_series(v: dict) -> list[Series]:
    """One series per op (its bandwidth-bound sizes filled), then one per training step model (squares)."""
    out = []
    for op in dict.fromkeys(r["op"] for r in v["rows"]):
        rows = [r for r in v["rows"] if r["op"] == op]
        out.append(
            Series(
                label=op,
                measured_us=[r["measured_us"] for r in rows],
                predicted_us=[r["predicted_us"] for r in rows],
                held=[r["bandwidth_bound"] for r in rows],
            )
        )
    for key in sorted(k for k, s in v.items() if k.endswith("_summary") and s):
        rows = v.get(key[: -len("_summary")]) or []
        out.append(
            Series(
                label=f"{key[: -len('_summary')]} step",
                measured_us=[r["measured_us"] for r in rows],
                predicted_us=[r["predicted_us"] for r in rows],
                held=[True] * len(rows),
                marker="s",
            )
        )
    return out


def write_validation_page(v: dict, out_json: str | os.PathLike) -> Path:
    """``<stem>.html`` and ``<stem>.png`` beside ``out_json`` (through temp names); the page's path."""
    stem = Path(out_json).with_suffix("")
    png = prediction_png(f"{TITLE} ({'/'.join(map(str, v['fit_ranks']))} ranks)", validation_series(v), TARGET)
    e = html.escape
    body = (
        "<h1>Predictions against measurements</h1>"
        f"<figure id='headline-figure'><img alt='{e(stem.name)}' "
        f"src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
        f"<figcaption>{e(verdict_line(v))}</figcaption></figure>"
        f"<h2>The table</h2><pre>{e(format_validation(v))}</pre>"
    )
    for path, data in (
        (stem.with_suffix(".png"), png),
        (stem.with_suffix(".html"), standalone_page("validate", body).encode()),
    ):
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return stem.with_suffix(".html")
