"""The pictures that open a report, under its verdict, world and warnings (suite/report/first_screen.py): the
run's headline sentences (suite/report/headline.py); the headline figure -- every collective's bus bandwidth
(its canonical form) against message size on one chart, under the link's rate (the run's streaming probe of
the link, else LINK_RATE across hosts: link_rate.link_figures) -- with the "% of link rate" at the largest
size per collective beside it; then each experiment's own first picture with the one line that says what to
see (its spec's ``glance`` hook; an experiment with its own section and no hook: that section's first
figure). Reads records only; renders nothing (suite/report/render.py)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from suite import results
from suite.report import figures
from suite.report.environment import fmt_bytes
from suite.report.first_screen import FirstScreen, first_screen
from suite.report.headline import canonical_form, headline_items, link_reference, link_text, noisy_dips, share
from suite.report.sections import Plot, PlotNames, Section
from suite.report.specs import library_collectives, spec_value


@dataclass(frozen=True, kw_only=True)
class Picture:
    """What an experiment's ``glance`` hook returns: its first picture and what to see in it."""

    title: str
    png: bytes | None
    """None: nothing to draw in this run (the caption says why)."""
    caption: str
    """One line: what the figure shows and what to look for."""


@dataclass(kw_only=True)
class Glance:
    headlines: list[str]
    """One sentence per experiment (headline.headlines)."""
    figure: Plot | None = None
    """The headline figure; None for a run without a collective's bandwidth."""
    caption: str = ""
    link_rows: list[list[str]] = field(default_factory=list)
    """Per collective: its largest size, its busbw there and that as a share of the link's rate (LINK_HEAD)."""
    pictures: list[tuple[Plot | None, str]] = field(default_factory=list)
    """Each experiment's first picture (None: a caption alone) and its caption, in the report's order."""
    screen: FirstScreen | None = None
    """What opens the page, above the headlines: the verdict, the backend and world, the warnings."""

    def plots(self) -> list[Plot]:
        return [p for p in [self.figure, *(p for p, _ in self.pictures)] if p is not None]


LINK_HEAD = ["collective", "largest size", "busbw (GB/s)", "% of link rate"]


def build_glance(run: dict, own_sections: dict[str, Section], plot_name: PlotNames) -> Glance:
    """The first screen of a run's report (``own_sections``: the sections experiments drew themselves)."""
    items = headline_items(run)
    g = Glance(headlines=[h.text for h in items], screen=first_screen(run, items))
    lines = collective_lines(run)
    if lines:
        g.figure, g.caption, g.link_rows = headline_figure(run, lines, plot_name)
    g.pictures = experiment_pictures(run, own_sections, plot_name)
    return g


def collective_lines(run: dict) -> list[tuple[str, list[dict]]]:
    """Per collective (and backend, device and world size where the run has several): its canonical form's
    records (``headline.canonical_form``: sum, float32, out-of-place where measured), sizes ascending."""
    groups: OrderedDict = OrderedDict()
    for r in results.records(run):
        if library_collectives(r["experiment"]) and r["op"] != "barrier" and r.get("busbw_gbps") and r["size_bytes"]:
            groups.setdefault((r["op"], r["backend"], r["device"], r["world_size"]), []).append(r)
    several = len({k[1:] for k in groups}) > 1
    return [
        (f"{op} ({backend}/{device}, {n} ranks)" if several else op, canonical_form(recs, op))
        for (op, backend, device, n), recs in groups.items()
    ]


def headline_figure(
    run: dict, lines: list[tuple[str, list[dict]]], plot_name: PlotNames
) -> tuple[Plot, str, list[list[str]]]:
    """The headline figure, its caption and the table beside it (one row per line, LINK_HEAD)."""
    rows, links, drawn, noisy = [], OrderedDict(), [], []
    for label, recs in lines:
        top = recs[-1]
        link = link_reference(run, top)
        if link is not None:
            links.setdefault((link.beta_gbps, link.source), link)
        cell = "-" if link is None else share(top["busbw_gbps"], link).cell
        rows.append([label, fmt_bytes(top["size_bytes"]), f"{top['busbw_gbps']:z.3g}", cell])
        dips = noisy_dips(recs)
        if dips:  # a fall beyond the intervals is the machine's noise: said so on the line, not drawn as a feature
            noisy.append(f"{label} falls at {', '.join(fmt_bytes(s) for s in dips)}")
            label += " (noise: not monotonic)"
        drawn.append((label, [r["size_bytes"] for r in recs], [r["busbw_gbps"] for r in recs]))
    named = [
        (link.beta_gbps, f"link rate {'measured' if link.measured else 'declared'}: {link_text(link)}")
        for link in links.values()
    ]
    title = "bus bandwidth of every collective against message size"
    png = figures.size_lines(title, drawn, ylabel="busbw (GB/s), sum, float32 where measured", ceilings=named)
    caption = (
        "Each collective's bus bandwidth (its canonical form: sum, float32, out-of-place where measured; the other "
        "forms are in the tables) under the link's rate ("
        + "; ".join(label for _, label in named)
        + "): a line near it uses the link fully, one far below is bound by latency or software; "
        "the table gives the share at the largest size."
        if named
        else "Each collective's bus bandwidth; no link rate to set it against "
        "(no p2p probe in this run, no LINK_RATE across hosts)."
    )
    if noisy:
        caption += (
            " Noise, not a feature: " + "; ".join(noisy) + " (below the size before by more than both intervals)."
        )
    return Plot(name=plot_name("headline", "busbw"), title=title, png=png), caption, rows


def experiment_pictures(
    run: dict, own_sections: dict[str, Section], plot_name: PlotNames
) -> list[tuple[Plot | None, str]]:
    """Each experiment's first picture and caption, in the report's order (its spec's report_order)."""
    by_exp: OrderedDict = OrderedDict()
    for r in results.records(run):
        by_exp.setdefault(r["experiment"], []).append(r)
    out: list[tuple[Plot | None, str]] = []
    for exp in sorted(by_exp, key=lambda e: spec_value(e, "report_order", 0)):
        hook = spec_value(exp, "glance", None)
        if hook is not None:
            pic = hook(run, by_exp[exp])
            if pic is not None:
                plot = None if pic.png is None else Plot(name=plot_name(exp, "glance"), title=pic.title, png=pic.png)
                out.append((plot, pic.caption))
        elif exp in own_sections and own_sections[exp].plots:
            first = own_sections[exp].plots[0]
            out.append((first, f"{exp}: {first.title} (the first figure of its section)"))
    return out
