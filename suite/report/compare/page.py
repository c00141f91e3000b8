"""The comparison's page, ``make compare``'s (``python -m suite.report compare BASE NEW --out DIR``): its verdict
first, then the forest plot, the summary, the ratio against size per group and the table of cases."""

from __future__ import annotations

import base64
import html
import os
from collections import OrderedDict
from pathlib import Path

from suite.report.page import html_table, screen_html, standalone_page
from suite.report.series import group_key


def write_comparison(c, out_dir: str | os.PathLike, stem: str = "compare") -> Path:
    """``<stem>.html`` (self-contained): it opens with its verdict, what was compared and its warnings
    (``first_screen``), then the forest plot of the cases (``<stem>.png``, ``suite.report.compare.forest``) with
    its one-line caption, then the summary, per group the new/base ratio vs
    size with its CI (``<stem>-by-size.png``), and the table of cases."""
    from suite.report import plots
    from suite.report.compare import forest
    from suite.report.compare.case_identity import describe_key
    from suite.report.compare.text import runs_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups: OrderedDict = OrderedDict()
    for r in c.cases:
        d = dict(r.key)
        name = (
            f"{d.get('experiment')}: {group_key(d) if 'op' in d else '?'} ({d.get('backend')}, "
            f"{d.get('device')}, {d.get('world_size')} ranks)"
        )
        groups.setdefault(name, []).append((int(d.get("size_bytes") or 0), r.ratio, r.ci_low, r.ci_high, r.verdict))
    grid = plots.ratio_grid(
        f"{c.new_name} vs {c.base_name}: {c.overall} (median case ratio {c.overall_ratio:z.3f})",
        list(groups.items()),
        c.tolerance,
    )
    rows_drawn = forest.select(c.cases)
    (png,) = plots.rasterize_all([forest.forest_figure(c, rows_drawn)], 1)
    (out / f"{stem}.png").write_bytes(png)
    (out / f"{stem}-by-size.png").write_bytes(grid)
    e = html.escape
    rows = [
        [
            describe_key(r.key),
            f"{r.base_median_us:z.1f}",
            f"{r.new_median_us:z.1f}",
            f"{r.ratio:z.3f}",
            f"[{r.ci_low:z.3f}, {r.ci_high:z.3f}]",
            f"{r.p_adjusted:z.3g}",
            f"{r.noise_sd:z.3f}",
            runs_text(r.runs_needed),
            r.verdict,
        ]
        for r in c.cases
    ]

    def img(data: bytes, alt: str) -> str:
        return f"<img alt='{e(alt)}' src='data:image/png;base64,{base64.b64encode(data).decode()}'>"

    body = (
        "<h1>Comparison</h1>"
        + screen_html(*first_screen(c))
        + f"<figure id='headline-figure'>{img(png, stem)}<figcaption>{e(forest.caption(c, rows_drawn))}</figcaption>"
        f"</figure><p>base: {e(c.base_name)}<br>new: {e(c.new_name)}</p><pre>{e(format_comparison_summary(c))}</pre>"
        f"<h2>By message size</h2>{img(grid, f'{stem}-by-size')}"
        + html_table(
            ["case", "base (µs)", "new (µs)", "ratio", f"{100 - c.alpha * 100:z.10g}% CI", "p (Holm)", "noise", "runs"]
            + ["verdict"],
            rows,
        )
    )
    (out / f"{stem}.html").write_text(standalone_page("compare", body))
    return out / f"{stem}.html"


def format_comparison_summary(c) -> str:
    from suite.report.compare.text import format_comparison

    lines = [ln for ln in format_comparison(c).splitlines() if ln.startswith("# ") and "case" not in ln[:8]]
    return "\n".join(dict.fromkeys(lines))  # the gate's line once (the terminal says it above and below its table)


def first_screen(c) -> tuple[str, bool, str, list[tuple[str, str]]]:
    """What the page opens with (page.screen_html's arguments): the gate and the overall ratio; the lanes
    compared (backend, device, ranks) and the two sides; and the warnings: what the runs could detect, the
    cases left inconclusive and how many runs would resolve them, settings that differ, cases not matched, and
    the cases of the oversubscribed pass left out."""
    from suite.report.compare.text import detect_line, gate_line, oversubscribed_line, repeat_advice

    verdict = (
        f"verdict: {gate_line(c)}; overall {c.overall} (median case ratio {c.overall_ratio:z.3f}, "
        f"CI [{c.overall_ci[0]:z.3f}, {c.overall_ci[1]:z.3f}])"
    )
    lanes = list(dict.fromkeys((d.get("backend"), d.get("device"), d.get("world_size")) for d in map(dict, _keys(c))))
    world = (
        "backend "
        + " and ".join(f"{b} on {dev}, {n} ranks" for b, dev, n in lanes)
        + f"; base: {c.base_name} ({c.base_runs} run(s)), new: {c.new_name} ({c.new_runs} run(s))"
    )
    warnings = [(k, v) for k, v in (("detectable", detect_line(c)), ("inconclusive", repeat_advice(c))) if v]
    warnings += [("settings differ", s) for s in c.settings_diffs]
    if c.only_base or c.only_new:
        warnings.append(("unmatched", f"{len(c.only_base)} cases only in base, {len(c.only_new)} only in new"))
    if c.oversubscribed:
        warnings.append(("not compared", oversubscribed_line(c)))
    return verdict, c.gate == "PASS", world, warnings


def _keys(c) -> list[tuple]:
    return [r.key for r in c.cases] + list(c.refused)
