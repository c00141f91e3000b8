"""The Trace Event Format's rules, as the tests read a run's ``trace.json`` (suite/postmortem/trace.py): what
Perfetto and chrome://tracing need to open it and draw one nested track per rank."""

from __future__ import annotations

import json
from pathlib import Path

PHASES = {"X", "M", "i"}


def load_trace(path: Path) -> dict:
    doc = json.loads(path.read_text())
    assert set(doc) == {"traceEvents", "displayTimeUnit", "otherData"}, sorted(doc)
    assert doc["displayTimeUnit"] in ("ms", "ns") and isinstance(doc["otherData"], dict)
    return doc


def check_trace(doc: dict) -> dict[int, list[dict]]:
    """Assert the format's rules on every event and that each track's durations nest (a child lies within its
    parent, no partial overlap); rank -> its events (X and i), by the track names ``rank r``."""
    names: dict[tuple[int, int], str] = {}
    tracks: dict[tuple[int, int], list[dict]] = {}
    for e in doc["traceEvents"]:
        assert e.get("ph") in PHASES, e
        assert isinstance(e.get("name"), str) and e["name"], e
        assert all(isinstance(e.get(k), int) for k in ("pid", "tid")) and e["pid"] > 0, e  # pid 0: the swapper
        assert isinstance(e.get("ts"), (int, float)), e
        if e["ph"] == "M":
            if e["name"] == "thread_name":
                names[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        assert e["tid"] > 0, e
        if e["ph"] == "X":
            assert isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, e
        else:
            assert e.get("s") in ("t", "p", "g"), e
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for key, events in tracks.items():
        assert key in names, f"track {key} has no name"
        _assert_nested([e for e in events if e["ph"] == "X"], names[key])
    by_rank = {}
    for key, events in tracks.items():
        if names[key].startswith("rank ") and names[key][5:].isdigit():
            by_rank[int(names[key][5:])] = sorted(events, key=lambda e: (e["ts"], -e.get("dur", 0)))
    return by_rank


def _assert_nested(events: list[dict], track: str) -> None:
    def ns(x: float) -> int:
        return round(x * 1000)

    stack: list[tuple[int, int, str]] = []
    for e in sorted(events, key=lambda e: (ns(e["ts"]), -ns(e["dur"]))):
        start, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        while stack and stack[-1][1] <= start:
            stack.pop()
        assert not stack or end <= stack[-1][1], f"{track}: {e} overlaps {stack[-1][2]} partially"
        stack.append((start, end, e["name"]))


def ops(events: list[dict]) -> list[dict]:
    """A rank's op events (collectives, p2p, barriers), in time order."""
    return [e for e in events if e["ph"] == "X" and e.get("cat") == "op"]
