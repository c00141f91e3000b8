"""The backends experiment's first picture at the top of the report (its spec's ``glance`` hook): each
other lane's time over the first lane's, per op and size, side by side against 1; a run with one lane
says so in its caption. Reads stored records only."""

from __future__ import annotations

from collections import OrderedDict

from suite.api import Picture, figures

from .table import lane_of, lanes_of


def glance(run: dict, recs: list[dict]) -> Picture | None:
    """time(lane) / time(first lane) against size, one line per (lane, op); None without compare records."""
    compare = [r for r in recs if r.get("table", "compare") == "compare" and r.get("time_us") and r["size_bytes"]]
    lanes = lanes_of(compare)
    if not lanes:
        return None
    if len(lanes) < 2:
        return Picture(
            title="backends: time ratio",
            png=None,
            caption=f"backends: only {lanes[0]} ran, so there is no side-by-side ratio (the other lanes need "
            "their backend in this build of torch, or a GPU).",
        )
    best: dict = {}
    for r in compare:
        key = (lane_of(r), r["op"], r["size_bytes"])
        if key not in best or r["time_us"] < best[key]["time_us"]:
            best[key] = r
    lines: OrderedDict = OrderedDict()
    for (lane, op, size), r in sorted(best.items(), key=lambda kv: kv[0][2]):
        base = best.get((lanes[0], op, size))
        if lane != lanes[0] and base is not None:
            xs, ys = lines.setdefault(f"{lane} {op}", ([], []))
            xs.append(size)
            ys.append(r["time_us"] / base["time_us"])
    title = f"backends: each lane's time over {lanes[0]}'s"
    return Picture(
        title=title,
        png=figures.size_lines(
            title,
            [(label, xs, ys) for label, (xs, ys) in lines.items()],
            ylabel=f"time / {lanes[0]}'s time (same op and size)",
            ceilings=[(1.0, f"as fast as {lanes[0]}")],
        ),
        caption=f"backends: the same op and size on each lane against {lanes[0]}; below the line at 1 is faster, "
        "above it slower.",
    )
