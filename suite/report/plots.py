"""Plots of stored results (matplotlib, Agg; no display, no pyplot global state).

Every function takes records (and fits) and returns PNG bytes; the caller
decides where they go. Sizes are plotted on log2 axes with binary labels (1K,
64K, ...), times and bandwidths on log10 axes. Percentile bands are the
p05–p95 of the per-iteration samples of each case (for bandwidth: the same
band converted, bw ∝ 1/time).
"""

from __future__ import annotations

import contextlib
import io
import math
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from suite import results
from suite.model.fit import AlphaBeta
from suite.metrics import format_size
from suite.report.compare.verdicts import VERDICT_COLORS

DPI = 110


def _rasterize(fig: Figure) -> bytes:
    # layouts are set per figure: bbox_inches="tight" would draw every figure twice
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


_DEFERRED: ContextVar[list[Figure] | None] = ContextVar("suite_report_deferred_figures", default=None)
"""The figures of the innermost ``deferred()`` block (None outside one)."""
_TOKEN = b"\x00suite: deferred figure %d\x00"


def figure_png(fig: Figure) -> bytes:
    pending = _DEFERRED.get()
    if pending is None:
        return _rasterize(fig)
    pending.append(fig)
    return _TOKEN % (len(pending) - 1)


@contextlib.contextmanager
def deferred(workers: int | None = None) -> Iterator[dict[bytes, bytes]]:
    """Inside the block, the plot functions return a placeholder for each figure; when it ends, every
    figure is rasterized (the expensive part of a report: drawing and PNG encoding), spread over ``workers``
    processes (default: the CPUs this process may use, at most 4; on Linux) forked from this one, and the yielded
    dict maps each placeholder to its PNG. A worker that fails leaves its figures to this process."""
    pending: list[Figure] = []
    done: dict[bytes, bytes] = {}
    token = _DEFERRED.set(pending)
    try:
        yield done
    finally:
        _DEFERRED.reset(token)
    n = workers or min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    done.update((_TOKEN % i, png) for i, png in enumerate(rasterize_all(pending, n)))


WORKER_LIMIT_S = 300.0
"""Seconds from the workers' start (one deadline for all) after which a stuck one is ended, its share drawn here."""


def rasterize_all(figs: Sequence[Figure], workers: int) -> list[bytes]:
    """Each figure's PNG, in order; ``workers`` - 1 forked processes take a share (this one its own, then any left)."""
    shares = [list(range(i, len(figs), workers)) for i in range(max(1, min(workers, len(figs))))]
    if len(shares) < 2 or not sys.platform.startswith("linux"):  # fork is safe here (macOS: not with every lib)
        return [_rasterize(f) for f in figs]
    ctx = mp.get_context("fork")  # the children inherit the figures: nothing is pickled but the PNGs
    started = []
    for share in shares[1:]:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_render_share, args=(figs, share, send), daemon=True)
        proc.start()
        send.close()
        started.append((proc, recv, share))
    deadline = time.monotonic() + WORKER_LIMIT_S  # one for all: stuck workers are not waited for in turn
    out: list[bytes | None] = [None] * len(figs)
    for i in shares[0]:
        out[i] = _rasterize(figs[i])
    for proc, recv, share in started:
        try:
            got = recv.recv() if recv.poll(max(0.0, deadline - time.monotonic())) else None  # None: stuck
        except (EOFError, OSError):  # the worker died
            got = None
        if proc.is_alive() and got is None:
            proc.kill()
        proc.join()
        for i, png in zip(share, got if isinstance(got, list) else [None] * len(share)):
            out[i] = png if png is not None else _rasterize(figs[i])
    return out  # type: ignore[return-value]


def _render_share(figs: Sequence[Figure], share: list[int], send) -> None:
    try:
        send.send([_rasterize(figs[i]) for i in share])
    except Exception as e:  # noqa: BLE001 - the parent renders this share itself
        send.send(repr(e))
    finally:
        send.close()


def size_axis(ax) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(int(v)) if v >= 1 else f"{v:zg}"))
    ax.set_xlabel("message size (bytes)")
    ax.grid(True, which="both", alpha=0.3)


def sweep_plot(
    title: str,
    series: Sequence[tuple[str, list[dict]]],
    *,
    fits: dict[str, AlphaBeta] | None = None,
    ring: Callable[[np.ndarray], np.ndarray] | None = None,
    ring_label: str = "ring model",
    link_rate_gbps: float | None = None,
    link_rate_text: str = "",
) -> bytes:
    """Two panels, busbw and latency vs size (log-log), one line per series with its
    p05–p95 band; dashed: the series' α–β fit; dotted black: the ring model."""
    fig = Figure(figsize=(11, 4.4))
    ax_bw, ax_t = fig.subplots(1, 2)
    fig.suptitle(title, fontsize=11)
    colors = [f"C{i % 10}" for i in range(len(series))]
    all_sizes: list[int] = []
    for (label, recs), color in zip(series, colors):
        recs = sorted((r for r in recs if r["size_bytes"] > 0), key=lambda r: r["size_bytes"])
        if not recs:
            continue
        s = np.array([r["size_bytes"] for r in recs], float)
        all_sizes += list(s)
        t = np.array([r["time_us"] for r in recs])
        p05, p95 = (np.array(b) for b in zip(*(results.band_us(r) for r in recs)))
        bw = np.array([r.get("busbw_gbps") or r.get("algbw_gbps") or 0.0 for r in recs])
        ax_t.plot(s, t, "o-", color=color, label=label, ms=3, lw=1.2)
        ax_t.fill_between(s, p05, p95, color=color, alpha=0.15, lw=0)
        if np.any(bw > 0):
            ax_bw.plot(s, bw, "o-", color=color, label=label, ms=3, lw=1.2)
            ax_bw.fill_between(
                s, bw * t / np.maximum(p95, 1e-12), bw * t / np.maximum(p05, 1e-12), color=color, alpha=0.15, lw=0
            )
        fit = (fits or {}).get(label)
        if fit is not None:
            xs = np.geomspace(s.min(), s.max(), 64)
            ax_t.plot(xs, fit.time_us(xs), "--", color=color, lw=0.9, alpha=0.9)
            if bw.any() and recs[0].get("busbw_gbps") and recs[0].get("algbw_gbps"):
                factor = recs[0]["busbw_gbps"] / recs[0]["algbw_gbps"]
                ax_bw.plot(xs, xs / (fit.time_us(xs) * 1e3) * factor, "--", color=color, lw=0.9, alpha=0.9)
    if all_sizes and ring is not None:
        xs = np.geomspace(min(all_sizes), max(all_sizes), 64)
        rt = ring(xs)
        if rt is not None:
            ax_t.plot(xs, rt, ":", color="black", lw=1.5, label=ring_label)
    if link_rate_gbps:
        ax_bw.axhline(link_rate_gbps, color="red", ls="-.", lw=1, label=f"LINK_RATE {link_rate_text}")
    for ax, ylabel in ((ax_bw, "busbw (GB/s)"), (ax_t, f"time (µs), band {results.BAND_LABEL}")):
        size_axis(ax)
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
    ax_bw.set_title("bus bandwidth (dashed: α–β fit)", fontsize=9)
    ax_t.set_title("latency (dashed: α–β fit, dotted: ring model)", fontsize=9)
    handles, labels = ax_t.get_legend_handles_labels()
    h2, l2 = ax_bw.get_legend_handles_labels()
    for h, lab in zip(h2, l2):
        if lab not in labels:
            handles.append(h)
            labels.append(lab)
    rows = math.ceil(len(labels) / 4) if handles else 0
    fig.set_size_inches(11, 4.4 + 0.18 * rows)
    bottom = (0.62 + 0.17 * rows) / (4.4 + 0.18 * rows)  # inches kept for x labels and the legend
    fig.subplots_adjust(left=0.07, right=0.99, top=0.86, bottom=bottom, wspace=0.22)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=7, frameon=False)
    return figure_png(fig)


def pair_matrix_plot(title: str, recs: list[dict]) -> bytes:
    """Heatmaps of src -> dst: latency at the smallest size and bandwidth at the largest."""
    sizes = sorted({r["size_bytes"] for r in recs if r["size_bytes"] > 0}) or [0]
    picks = [("time_us", sizes[0], "one-way latency (µs)")]
    if sizes[-1] != sizes[0]:
        picks.append(("algbw_gbps", sizes[-1], "bandwidth (GB/s)"))
    ranks = sorted({int(r["src"]) for r in recs} | {int(r["dst"]) for r in recs})
    pos = {r: i for i, r in enumerate(ranks)}
    fig = Figure(figsize=(5.2 * len(picks), 4.4), layout="tight")
    axes = fig.subplots(1, len(picks), squeeze=False)[0]
    fig.suptitle(title, fontsize=11)
    for ax, (fieldname, size, what) in zip(axes, picks):
        m = np.full((len(ranks), len(ranks)), np.nan)
        for r in recs:
            if r["size_bytes"] == size and r.get(fieldname) is not None:
                m[pos[int(r["src"])], pos[int(r["dst"])]] = float(r[fieldname])
        cmap = "viridis_r" if fieldname == "time_us" else "viridis"
        im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap)
        fig.colorbar(im, ax=ax, shrink=0.8)
        ax.set_xticks(range(len(ranks)), [str(r) for r in ranks])
        ax.set_yticks(range(len(ranks)), [str(r) for r in ranks])
        ax.set_xlabel("dst rank")
        ax.set_ylabel("src rank")
        ax.set_title(f"{what} at {format_size(size)}B", fontsize=9)
        if len(ranks) <= 12:
            finite = m[np.isfinite(m)]
            mid = (finite.min() + finite.max()) / 2 if finite.size else 0
            for i in range(len(ranks)):
                for j in range(len(ranks)):
                    if np.isfinite(m[i, j]):
                        # viridis is dark at its low end; latency uses it reversed (high = dark)
                        dark_cell = m[i, j] > mid if fieldname == "time_us" else m[i, j] <= mid
                        ax.text(
                            j,
                            i,
                            f"{m[i, j]:z.3g}",
                            ha="center",
                            va="center",
                            fontsize=7,
                            color="white" if dark_cell else "black",
                        )
    return figure_png(fig)


def bar_plot(
    title: str,
    labels: Sequence[str],
    panels: Sequence[tuple[str, Sequence[float], Sequence[tuple[float, float]] | None]],
) -> bytes:
    """One horizontal bar chart per panel (name, values, optional (low, high) error ranges)."""
    n = len(labels)
    fig = Figure(figsize=(min(16.0, 2.5 + 4.0 * len(panels)), max(2.2, 0.32 * n + 1.2)), layout="tight")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    fig.suptitle(title, fontsize=11)
    y = np.arange(n)
    for k, (ax, (name, values, ranges)) in enumerate(zip(axes, panels)):
        v = np.array([np.nan if x is None else float(x) for x in values])
        xerr = None
        if ranges is not None:
            lo = np.array([max(0.0, vi - a) for vi, (a, _) in zip(v, ranges)])
            hi = np.array([max(0.0, b - vi) for vi, (_, b) in zip(v, ranges)])
            xerr = np.vstack([lo, hi])
        ax.barh(y, np.nan_to_num(v), xerr=xerr, color=f"C{k}", alpha=0.8, capsize=2)
        ax.set_yticks(y, labels if k == 0 else [""] * n, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(name)
        ax.grid(True, axis="x", alpha=0.3)
    return figure_png(fig)


def ratio_grid(
    title: str, panels: Sequence[tuple[str, list[tuple[int, float, float, float, str]]]], tolerance: float
) -> bytes:
    """Comparison of two runs: per group, new/base time ratio vs size with its CI; red =
    slower, green = faster, grey = same, orange = inconclusive; the band is 1 ± tolerance."""
    cols = min(3, max(1, len(panels)))
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(4.2 * cols, 2.9 * rows + 0.6), layout="tight")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    fig.suptitle(title, fontsize=11)
    for ax, (name, pts) in zip(axes, panels):
        sizes = [max(p[0], 1) for p in pts]
        ax.axhspan(1 - tolerance, 1 + tolerance, color="0.85", alpha=0.6, lw=0)
        ax.axhline(1.0, color="0.3", lw=0.8)
        for (_, ratio, lo, hi, verdict), x in zip(pts, sizes):
            ax.errorbar(
                [x],
                [ratio],
                yerr=[[max(0.0, ratio - lo)], [max(0.0, hi - ratio)]],
                fmt="o",
                ms=3,
                color=VERDICT_COLORS.get(verdict, "0.45"),
                capsize=2,
                lw=1,
            )
        if len(set(sizes)) > 1:
            size_axis(ax)
        else:
            ax.set_xticks([sizes[0]], [format_size(int(pts[0][0])) + "B"])
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:zg}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(name, fontsize=8)
        ax.set_ylabel("new / base time", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    return figure_png(fig)
