"""The "ideal" timeline: one step replayed as recorded and idealised, side by side, as a Chrome trace (the Trace
Event Format that ui.perfetto.dev and chrome://tracing open): one process each, a thread per rank, each rank's
compute segments and ops. Every event here is modelled (a replay of the step's graph), not measured."""

from __future__ import annotations

from suite.postmortem.replay.graph import END, Graph, Replay


def _events(g: Graph, rp: Replay, pid: int, name: str) -> list[dict]:
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0, "args": {"name": name}}]
    for r in g.ranks:
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": r + 1, "ts": 0, "args": {"name": f"rank {r}"}})
        for (rank, k), t in rp.end.items():
            if rank != r:
                continue
            p = g.pred[r, k]
            seg_start = rp.start[r, END] if p is None else rp.end[r, p]
            seg_end = t if k == END else rp.start[r, k]
            if seg_end > seg_start:
                out.append(_x("compute", "compute", pid, r, seg_start, seg_end))
            if k != END:
                args = {"index": k[1], **({"group": k[2]} if len(k) > 2 else {})}
                out.append(_x(k[0], "op", pid, r, rp.start[r, k], t, args))
    return out


def _x(name: str, cat: str, pid: int, rank: int, a: float, b: float, args: dict | None = None) -> dict:
    ev = {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": rank + 1, "ts": round(a * 1e6, 3)}
    ev["dur"] = round(max(0.0, b - a) * 1e6, 3)
    if args:
        ev["args"] = args
    return ev


def chrome_trace(g: Graph, real: Replay, ideal: Replay, case: str) -> dict:
    return {
        "traceEvents": _events(g, real, 1, "replayed as recorded (modelled)")
        + _events(g, ideal, 2, "idealised: no straggler (modelled)"),
        "displayTimeUnit": "ms",
        "otherData": {
            "what": f"one step of {case} (the case's median step), replayed from its graph as recorded and idealised",
            "provenance": "modelled: suite/postmortem/replay (every event is a replay of the step's dependency graph)",
            "how_to_open": "https://ui.perfetto.dev (Open trace file) or chrome://tracing (Load)",
        },
    }
