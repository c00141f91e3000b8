"""Figures of ranks and the links between them (matplotlib, Agg, like suite/report/plots.py): the rank x rank
link matrices with what is wrong outlined (a slow link's cell, a weak node's rows or columns) and, under them,
each rank's time as a bar with the straggler's in red; and every rank's time distribution per probe.

``link_figure`` returns the Figure, so a test can read what it drew (each outline and bar carries a gid);
the other functions return PNG bytes (or a deferred placeholder, plots.deferred)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter

from suite.metrics import format_time_us
from suite.report.plots import figure_png

PROBES = (
    ("latency", "one-way latency (µs)", "viridis_r"),
    ("bandwidth", "bandwidth src -> dst (MB/s)", "viridis"),
    ("bidirectional", "both directions at once (MB/s)", "viridis"),
)
"""The link probes drawn, in order: (probe, what a cell holds, colour map: dark is slow in each)."""
FLAG = "tab:red"


@dataclass(frozen=True)
class Block:
    """A weak node in one matrix: its ranks' rows (what they send) or columns (what they receive) framed."""

    probe: str
    axis: str
    """"rows" or "columns"."""
    ranks: tuple[int, ...]
    label: str


@dataclass(frozen=True)
class RankBars:
    """One bar per rank under the matrices: each rank's median time in one probe, the flagged ones in red."""

    title: str
    values_us: Sequence[float | None]
    flagged: Sequence[int]


def link_figure(
    links: list[dict], hosts: Sequence[str], *, title: str, blocks: Sequence[Block] = (), bars: RankBars | None = None
) -> Figure:
    """The doctor's link matrices (src row -> dst column), each link's median over its passes: a slow link's
    cell framed in red (both cells of a pair), each of ``blocks`` framed around its rows or columns, host
    boundaries in white; ``bars`` under them when given."""
    probes = [p for p in PROBES if any(e["probe"] == p[0] for e in links)]
    fig = Figure(figsize=(4.6 * max(1, len(probes)), 4.3 + (2.7 if bars else 0.0)), layout="constrained")
    fig.suptitle(title, fontsize=11)
    top, low = fig.subfigures(2, 1, height_ratios=[4.3, 2.7]) if bars else (fig, None)
    axes = top.subplots(1, max(1, len(probes)), squeeze=False)[0]
    for ax, probe in zip(axes, probes):
        _matrix(ax, top, probe, links, hosts, [b for b in blocks if b.probe == probe[0]])
    if bars is not None:
        _bars(low.subplots(), bars, hosts)
    return fig


def _matrix(ax, fig, probe: tuple[str, str, str], links: list[dict], hosts: Sequence[str], blocks) -> None:
    name, what, cmap = probe
    n = len(hosts)
    m = np.full((n, n), np.nan)
    mine = [e for e in links if e["probe"] == name]
    for e in mine:
        m[e["src"], e["dst"]] = e["median_us"] if name == "latency" else e["gbps"] * 1e3
        if name != "bandwidth":  # a pair: both cells
            m[e["dst"], e["src"]] = m[e["src"], e["dst"]]
    im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap)
    fig.colorbar(im, ax=ax, shrink=0.8)
    for e in mine:
        if e["slow"]:
            for i, j in [(e["src"], e["dst"])] + ([] if name == "bandwidth" else [(e["dst"], e["src"])]):
                ax.add_patch(  # inside the cell, clear of the axes' frame
                    Rectangle(
                        (j - 0.45, i - 0.45), 0.9, 0.9, fill=False, edgecolor=FLAG, lw=3, gid=f"slow:{name}:{i}->{j}"
                    )
                )
    for b in blocks:  # the ranks of a host are consecutive: one frame around them
        lo, hi = min(b.ranks) - 0.5, max(b.ranks) + 0.5
        xy, w, h = ((-0.5, lo), n, hi - lo) if b.axis == "rows" else ((lo, -0.5), hi - lo, n)
        ax.add_patch(Rectangle(xy, w, h, fill=False, edgecolor=FLAG, lw=3.2, ls="--", gid=f"block:{name}:{b.axis}"))
    for k in range(1, n):  # host boundaries
        if hosts[k] != hosts[k - 1]:
            ax.axhline(k - 0.5, color="white", lw=1.5)
            ax.axvline(k - 0.5, color="white", lw=1.5)
    ticks = [f"{r}\n{hosts[r]}" if n <= 8 else str(r) for r in range(n)]
    ax.set_xticks(range(n), ticks, fontsize=6)
    ax.set_yticks(range(n), [t.replace("\n", " ") for t in ticks], fontsize=6)
    ax.set_xlabel("dst rank (receives)")
    ax.set_ylabel("src rank (sends)")
    ax.set_title(what + ("; red: slow" if any(e["slow"] for e in mine) or blocks else ""), fontsize=9)
    if n <= 12:
        for i, j in zip(*np.nonzero(np.isfinite(m))):
            r, g, b_, _ = im.cmap(im.norm(m[i, j]))
            ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b_ > 0.5 else "white"  # luma of the cell's colour
            ax.text(j, i, f"{m[i, j]:z.0f}" if m[i, j] >= 100 else f"{m[i, j]:z.3g}", ha="center", va="center",
                    fontsize=6, color=ink)  # fmt: skip


def _bars(ax, bars: RankBars, hosts: Sequence[str]) -> None:
    values = [math.nan if v is None else float(v) for v in bars.values_us]
    ranks = range(len(values))
    for r, v in zip(ranks, values):
        ax.bar(r, v, width=0.6, color=FLAG if r in bars.flagged else "C0", alpha=0.85, gid=f"rank:{r}")
    finite = [v for v in values if math.isfinite(v)]
    if finite:
        ax.axhline(float(np.median(finite)), color="black", lw=1.0, ls="--", label="median over ranks")
        ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 1.0), frameon=False)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_time_us(v)))
    ax.set_xticks(list(ranks), [f"{r}\n{hosts[r]}" if len(values) <= 8 else str(r) for r in ranks], fontsize=6)
    ax.set_xlabel("rank")
    ax.set_ylabel("median time", fontsize=8)
    ax.set_title(bars.title, fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)


def link_matrices(links: list[dict], hosts: Sequence[str], **kw) -> bytes:
    """``link_figure`` as PNG bytes."""
    return figure_png(link_figure(links, hosts, **kw))


def rank_distributions(probes: Sequence[tuple[str, list[list[float]]]], stragglers: Sequence[int] = ()) -> bytes:
    """Per probe, a box plot of every rank's own times over the samples (stragglers in red)."""
    cols = min(3, max(1, len(probes)))
    rows = math.ceil(len(probes) / cols)
    fig = Figure(figsize=(4.4 * cols, 2.8 * rows + 0.4), layout="tight")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (name, per_rank) in zip(axes, probes):
        bp = ax.boxplot(per_rank, patch_artist=True, widths=0.6, showfliers=True, flierprops={"markersize": 2})
        for r, box in enumerate(bp["boxes"]):
            box.set_facecolor(FLAG if r in stragglers else "C0")
            box.set_alpha(0.7)
        ax.set_xticks(range(1, len(per_rank) + 1), [str(r) for r in range(len(per_rank))], fontsize=7)
        ax.set_xlabel("rank", fontsize=8)
        ax.set_ylabel("own time (µs)", fontsize=8)
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    for ax in axes[len(probes) :]:
        ax.set_visible(False)
    return figure_png(fig)
