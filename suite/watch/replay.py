"""The watch's point series, kept in the run's record (``watch_series``), and its detectors replayed on it offline.

What rank 0 fed its detectors, per point of the series (a step, or a block of steps: suite/watch/watch.py): the
point's first step, rank 0's clock at its start (seconds from the first step's), and per rank (in the order of
``ranks``) its compute (the block's median, fed to the change-point detector, detect.py) and its own time (the
block's mean of ``pauses.held``, fed to the pause detector, pauses.py), in µs rounded to 0.1 µs, and the CPU
processes outside the run used on its host over the exchange that brought the point (``foreign_pct``, percent:
suite/watch/foreign.py; null where not measured, absent in a series kept before it was). The watch feeds
its detectors the rounded values, so a replay raises the same flags at the same points as the run did (all but a
link probe's, suite/watch/links.py, which measured the run's links):

    python -m suite.watch.replay results/<run>/bench.json

prints, per watched case of the record, each flag's line and the point it was raised at; ``replay(series)`` returns
the flags (their onset and detection as point indices), for a rule tried on kept series (a false alarm's, a slowed
rank's) before it goes into the detector.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping

from suite.watch import detect, pauses

ROUND_US = 1
"""Digits after the µs kept of each value."""


def us(seconds: float) -> float:
    """A value as the series keeps it and the detectors see it: µs rounded to ``ROUND_US`` digits, back in seconds."""
    return round(seconds * 1e6, ROUND_US) / 1e6


class Points:
    """The detectors of one watch fed one point at a time, the same in the run and in a replay."""

    def __init__(self, ranks: list[int], nodes: Mapping[str, tuple[int, ...]]) -> None:
        self.ranks = list(ranks)
        targets = {f"rank {r}": (r,) for r in self.ranks}
        self.detector = detect.Detector("compute", "rank", targets)
        self.pauses = pauses.Pauses("compute", "rank", targets)
        self.by_node = detect.Nodes({k: tuple(v) for k, v in nodes.items()})
        self.named: set[str] = set()  # the targets flagged (by either series)
        self.series: dict[str, list] = {"step": [], "t_s": [], "compute_us": [], "held_us": [], "foreign_pct": []}

    def add(
        self, step: int, t_s: float, compute: list[float], held: list[float], foreign_pct: list | None = None
    ) -> list[detect.Flag]:
        """One point: its first step, its start (s), each rank's compute and own time (s), and the CPU outside the run
        on its host (percent, suite/watch/foreign.py; None: not measured); the flags it raises, each with that CPU's
        mean since its onset."""
        compute = [max(us(c), 1e-9) for c in compute]
        held = [max(us(h), 1e-9) for h in held]
        s = self.series
        s["step"].append(step)
        s["t_s"].append(round(t_s, 6))
        s["compute_us"].append([round(c * 1e6, ROUND_US) for c in compute])
        s["held_us"].append([round(h * 1e6, ROUND_US) for h in held])
        s["foreign_pct"].append(list(foreign_pct) if foreign_pct is not None else [None] * len(self.ranks))
        flags = []
        for det, values in ((self.detector, compute), (self.pauses, held)):
            point = {f"rank {r}": v for r, v in zip(self.ranks, values, strict=True)}
            flags += [f for f in det.add(point) if f.target not in self.named]
            self.named.update(f.target for f in flags)
        flags = [dataclasses.replace(f, foreign=self.foreign_since(f)) for f in flags]
        return self.by_node.add(flags) if flags else []

    def foreign_since(self, f: detect.Flag) -> float | None:
        """The mean, over the points since ``f``'s onset, of the CPU outside the run on its ranks' hosts (percent;
        None: not measured there)."""
        at = [self.ranks.index(r) for r in f.ranks]
        seen = [p[k] for p in self.series["foreign_pct"][f.onset :] for k in at if p[k] is not None]
        return round(sum(seen) / len(seen), 1) if seen else None

    def kept(self) -> dict:
        """The series as the record keeps it."""
        return {"ranks": self.ranks, "nodes": {k: list(v) for k, v in self.by_node.nodes.items()}, **self.series}


def replay(series: Mapping) -> list[tuple[int, detect.Flag]]:
    """The detectors run again on a kept series: each flag with the point it was raised at."""
    p = Points(list(series["ranks"]), {k: tuple(v) for k, v in series.get("nodes", {}).items()})
    out = []
    foreign_pct = series.get("foreign_pct") or [None] * len(series["step"])  # a series kept before it was measured
    for i, (step, t, c, h, fp) in enumerate(
        zip(series["step"], series["t_s"], series["compute_us"], series["held_us"], foreign_pct, strict=True)
    ):
        out += [(i, f) for f in p.add(step, t, [x / 1e6 for x in c], [x / 1e6 for x in h], fp)]
    return out


def _records(path: str) -> list[tuple[str, dict]]:
    with open(path) as f:
        data = json.load(f)
    if "benchmarks" in data:  # a run's bench.json
        return [(b.get("name", "?"), b.get("extra_info", {})) for b in data["benchmarks"]]
    return [("record", data)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m suite.watch.replay", description=__doc__.split("\n")[0])
    ap.add_argument("record", help="a run's bench.json, or one record (a JSON object with watch_series)")
    a = ap.parse_args(argv)
    try:
        records = _records(a.record)
    except (OSError, ValueError) as e:
        print(f"error: cannot read {a.record}: {e}", file=sys.stderr)
        return 2
    kept = [(name, rec["watch_series"]) for name, rec in records if rec.get("watch_series")]
    if not kept:
        print(f"error: {a.record} holds no watch_series (no watched case)", file=sys.stderr)
        return 2
    for name, series in kept:
        flags = replay(series)
        print(f"{name}: {len(series['step'])} points, {len(flags)} flag(s)")
        for i, f in flags:  # the line's steps are the points' first steps
            after = series["t_s"][i] - series["t_s"][f.onset]
            at = dataclasses.replace(f, onset=series["step"][f.onset], detected=series["step"][f.detected])
            print(f"  point {i} (onset point {f.onset}): {detect.line(at, after)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
