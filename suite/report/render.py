"""Rendering of a report (suite/report/analysis.py) as HTML, Markdown and CSV; the page opens with its verdict,
world and warnings (suite/report/first_screen.py). Files are written through temp names and renamed."""

from __future__ import annotations

from suite.metrics import format_time_us

import base64
import dataclasses
import csv
import html
import io
import json
import os
from collections import OrderedDict
from pathlib import Path

from suite import results

from suite.report.analysis import Report, build_report
from suite.report.fit_table import FIT_NOTE, fit_misses, fit_table_rows
from suite.report.glance import LINK_HEAD, Glance
from suite.report.page import CHECK_JS, CSP, CSS, html_table, screen_html, screen_markdown


HANG_HEAD = ["rank", "host", "state", "op", "case", "where"]


def hang_section(run: dict, run_dir: Path) -> dict | None:
    """The launcher's hang diagnosis of the run (bench.json ``suite.hang_diagnosis``), with the per-rank
    table of ``failures/hang.json`` where it is next to the run; None for a run without one."""
    verdict = (run.get("suite") or {}).get("hang_diagnosis")
    if not verdict:
        return None
    try:
        table = json.loads((run_dir / "failures" / "hang.json").read_text()).get("table") or []
    except (OSError, ValueError, AttributeError):
        table = []
    rows = [[str(r.get(k, "")) for k in HANG_HEAD] for r in table if isinstance(r, dict)]
    return {"kind": verdict.get("kind") or "?", "verdict": verdict.get("verdict") or "?", "rows": rows}


TRACE_LINE = (
    "Timeline of every rank: {link} (open it in ui.perfetto.dev, which reads it in the browser without uploading "
    "it, or in chrome://tracing)"
)


def _link(path: str) -> str:
    return f"<a href='{html.escape(path)}'>{html.escape(path)}</a>"


def _glance_html(g: Glance | None, img) -> list[str]:
    """The headline sentences, the headline figure with its table beside it, each experiment's first picture."""
    e = html.escape
    if g is None:
        return []
    out = ["<div id='headline'><ul>" + "".join(f"<li>{e(h)}</li>" for h in g.headlines) + "</ul></div>"]
    if g.figure is not None:
        out.append(
            f"<div id='glance'><figure id='headline-figure'>{img(g.figure)}<figcaption>{e(g.caption)}</figcaption>"
            f"</figure><div>{html_table(LINK_HEAD, g.link_rows)}</div></div>"
        )
    for p, caption in g.pictures:
        out.append(
            f"<figure>{img(p)}<figcaption>{e(caption)}</figcaption></figure>"
            if p
            else f"<p class='caption'>{e(caption)}</p>"
        )
    return out


def render_html(rep: Report, hang: dict | None = None, trace: str | None = None) -> str:
    e = html.escape
    shown: dict[bytes, str] = {}  # a figure already on the page (the doctor's, at the top and in its section)

    def img(p) -> str:
        if p.png in shown:
            return f"<p class='note'><a href='#{shown[p.png]}'>{e(p.title)}: the figure above</a></p>"
        shown[p.png] = f"fig-{p.name}"
        b64 = base64.b64encode(p.png).decode()
        return f"<img id='fig-{e(p.name)}' alt='{e(p.name)}' src='data:image/png;base64,{b64}'>"

    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='Content-Security-Policy' "
        f'content="{CSP}"><title>Report {e(rep.run_name)}</title>'
        f"<style>{CSS}</style><script>{CHECK_JS}</script></head><body>",
        f"<h1>Communication report: {e(rep.run_name)}</h1>",
        *([screen_html(**vars(screen))] if (screen := rep.glance and rep.glance.screen) else []),
        *(
            [
                "<h2 id='hang'>Hang diagnosis</h2>",
                f"<p><b>{e(hang['kind'])}</b>: {e(hang['verdict'])}</p>",
                html_table(HANG_HEAD, hang["rows"]) if hang["rows"] else "",
                "<p class='note'>failures/hang.txt and hang.json of the run (docs/failures.md, Debugging a hang)</p>",
            ]
            if hang
            else []
        ),
        *_glance_html(rep.glance, img),
        *([f"<p class='note' id='trace'>{TRACE_LINE.format(link=_link(trace))}</p>"] if trace else []),
        "<p><a href='#summary'>summary</a> · <a href='#environment'>environment</a> · <a href='#fits'>α–β fits</a> · "
        + " · ".join(f"<a href='#{s.anchor}'>{e(s.title)}</a>" for s in rep.sections)
        + "</p>",
        "<h2 id='summary'>Summary</h2>",
        html_table(["", ""], [[k, v] for k, v in rep.summary]),
        "<h2 id='environment'>Environment</h2>",
        html_table(["", ""], [[k, v] for k, v in rep.environment]),
    ]
    out.append("<h2 id='fits'>α–β fits and the ring model</h2>")
    out.append(f"<p class='note'>{e(FIT_NOTE)}</p>")
    for (backend, device, n), link in rep.links.items():
        out.append(
            f"<p class='note'>Reference link for {e(backend)}/{e(device)}, {n} ranks: "
            f"α = {format_time_us(link.alpha_us)},"
            f" β = {link.beta_gbps:z.4g} GB/s ({e(link.source)})"
            + (
                f"; configured LINK_RATE {e(rep.link_rate[0])} = {rep.link_rate[1]:z.4g} GB/s, "
                f"ratio {link.beta_gbps / rep.link_rate[1]:z.2f}"
                if rep.link_rate
                else ""
            )
            + "</p>"
        )
    if rep.fits:
        head, rows = fit_table_rows(rep)
        out += [html_table(head, rows)] if rows else []  # no header over nothing: the lines below say why
        out += [f"<p class='note fit-miss'>{e(line)}</p>" for line in fit_misses(rep)]
    else:
        out.append("<p>No size sweeps to fit.</p>")
    for s in rep.sections:
        out.append(f"<h2 id='{s.anchor}'>{e(s.title)}</h2>")
        for note in s.notes:
            out.append(f"<pre class='note'>{e(note)}</pre>")
        for p in s.plots:
            out.append(f"<h3>{e(p.title)}</h3>{img(p)}")
        for head, rows in s.grids:
            out.append(html_table(head, rows))
        for t in s.text_tables:
            out.append(f"<details><summary>text tables</summary><pre>{e(t)}</pre></details>")
    out.append("<p id='imgcheck'></p></body></html>")
    return "\n".join(out)


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    def esc(c):
        return str(c).replace("|", "\\|")

    return "\n".join(
        ["| " + " | ".join(map(esc, head)) + " |", "|" + "---|" * len(head)]
        + ["| " + " | ".join(map(esc, r)) + " |" for r in rows]
    )


def _glance_markdown(g: Glance | None) -> list[str]:
    """The headline sentences, the headline figure and its table, each experiment's first picture."""
    if g is None:
        return []
    out = [f"- {h}" for h in g.headlines] + [""]
    if g.figure is not None:
        out += [f"![{g.figure.title}]({g.figure.name}.png)", "", g.caption, "", _md_table(LINK_HEAD, g.link_rows), ""]
    for p, caption in g.pictures:
        out += ([f"![{p.title}]({p.name}.png)", ""] if p else []) + [caption, ""]
    return out


def render_markdown(rep: Report, hang: dict | None = None, trace: str | None = None) -> str:
    md_table = _md_table
    out = [
        f"# Communication report: {rep.run_name}",
        "",
        *(
            screen_markdown(screen.verdict, screen.world, screen.warnings)
            if (screen := rep.glance and rep.glance.screen)
            else []
        ),
        *(
            ["## Hang diagnosis", "", f"**{hang['kind']}**: {hang['verdict']}", ""]
            + ([md_table(HANG_HEAD, [[*r[:-1], f"`{r[-1]}`"] for r in hang["rows"]]), ""] if hang["rows"] else [])
            if hang
            else []
        ),
        *_glance_markdown(rep.glance),
        *([TRACE_LINE.format(link=f"[{trace}]({trace})"), ""] if trace else []),
        "## Summary",
        "",
        md_table(["", ""], rep.summary),
        "",
        "## Environment",
        "",
        md_table(["", ""], rep.environment),
        "",
        "## α–β fits and the ring model",
        "",
        FIT_NOTE,
        "",
    ]
    for (backend, device, n), link in rep.links.items():
        out.append(
            f"- reference link {backend}/{device}, {n} ranks: α = {format_time_us(link.alpha_us)}, "
            f"β = {link.beta_gbps:z.4g} GB/s ({link.source})"
        )
    if rep.fits:
        head, rows = fit_table_rows(rep)
        out += (["", md_table(head, rows)] if rows else []) + ["", *(f"- {line}" for line in fit_misses(rep))]
    for s in rep.sections:
        out += ["", f"## {s.title}", ""] + [n + "\n" for n in s.notes]
        out += [f"![{p.title}]({p.name}.png)" for p in s.plots]
        for t in s.text_tables:
            out += ["", "```", t.rstrip(), "```"]
    return "\n".join(out) + "\n"


CSV_FIRST = ("run_id",) + results.REQUIRED_FIELDS


def to_csv(run: dict) -> str:
    """One row per record; shared fields first, then every other field (lists/dicts as JSON);
    per-iteration samples are left out (they stay in bench.json)."""
    recs = results.records(run)
    run_id = (run.get("suite") or {}).get("run_id", "")
    extra: OrderedDict = OrderedDict()
    for r in recs:
        for k in r:
            if k not in CSV_FIRST and k != "samples_us":
                extra.setdefault(k, None)
    cols = list(CSV_FIRST) + sorted(extra)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in recs:
        row = []
        for c in cols:
            v = run_id if c == "run_id" else r.get(c, "")
            row.append(json.dumps(v) if isinstance(v, (list, dict)) else ("" if v is None else v))
        w.writerow(row)
    return buf.getvalue()


def _run_dir(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p.parent if p.is_file() else p


def write_report(
    run_path: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    base: tuple[str, list[list[dict]]] | None = None,
) -> Path:
    """Write index.html, report.md, the PNGs and results.csv; return the HTML's path.

    Default location: ``<run dir>/report/``. Files are written through temp names and
    renamed, so a reader never sees a half-written report."""
    run = results.load_run(run_path)
    rd = _run_dir(run_path)
    out = Path(out_dir) if out_dir is not None else rd / "report"
    out.mkdir(parents=True, exist_ok=True)
    name = str((run.get("suite") or {}).get("run_id") or rd.resolve().name)
    pj = rd / "predict.json"  # make predict's extrapolation, if it ran (suite/model/)
    from suite.report import plots

    predict_doc = json.loads(pj.read_text()) if pj.is_file() else None
    with plots.deferred() as pngs:  # the figures are rasterized together, in parallel where CPUs allow
        rep = build_report(run, run_name=name, predict_doc=predict_doc, base=base)
    for s in rep.sections:
        s.plots[:] = [dataclasses.replace(p, png=pngs.get(p.png, p.png)) for p in s.plots]
    g = rep.glance
    if g is not None:
        g.figure = g.figure and dataclasses.replace(g.figure, png=pngs.get(g.figure.png, g.figure.png))
        g.pictures = [(p and dataclasses.replace(p, png=pngs.get(p.png, p.png)), c) for p, c in g.pictures]

    def put(fname: str, data: bytes) -> None:
        tmp = out / f".{fname}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, out / fname)

    for p in {
        p.name: p for p in [*(rep.glance.plots() if rep.glance else []), *(p for s in rep.sections for p in s.plots)]
    }.values():
        put(f"{p.name}.png", p.png)
    put("results.csv", to_csv(run).encode())
    hang = hang_section(run, rd)
    trace = os.path.relpath(rd / "trace.json", out) if (rd / "trace.json").is_file() else None  # postmortem/trace.py
    put("report.md", render_markdown(rep, hang, trace).encode())
    put("index.html", render_html(rep, hang, trace).encode())
    return out / "index.html"
