"""The run's timeline: ``<run>/trace.json``, the ranks' parts merged into one Chrome trace.

Each rank leaves its part in ``<run>/trace/rank<r>.json`` (suite/harness/journal/timeline.py) at the end of its
session and whenever its journal dumps; a rank that could not (killed, or ended while it wrote) may still
have left its journal's last ops in ``<run>/hang/rank<r>.json``, or at least their starts in its ring file
(``rank<r>.ring``, suite/common/journal_ring.py). ``write_trace`` merges whatever is there,
the newer record of an op winning, into the Trace Event Format that ui.perfetto.dev and chrome://tracing open
(``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``):

- one process per host (pid 1, 2, ...), one thread per rank in it (tid = rank + 1, named ``rank r``:
  Perfetto takes pid 0 for the kernel's swapper and has merged tid 0 with tid 1);
- on each rank's track, nested: each case, its phases, its timed samples (``step`` where the case's time
  includes compute: a DDP or sharded training step), the ops the journal saw (``X`` events, ``args``: op,
  group, seq, bytes, case, ...), and in each step the time between its ops as ``compute`` spans; an op still
  waiting when its rank last wrote ends there (``state: entered``);
- an ``i`` instant where a rank's ops of a case start being dropped (the bound, suite/harness/journal/timeline.py);
- ``otherData``: the clocks, the bounds and what was dropped, what the ops are and are not.

The launcher calls it when the ranks have ended (suite/launch/cli.py); ``python -m suite.postmortem.trace RUN``
merges a run's parts again. Once every rank's part is in ``trace.json`` the parts are removed (``write_trace``):
the run keeps one copy of its timeline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from suite.common import journal_ring
from suite.common.fileio import write_text_atomic

TRACE = "trace.json"
OVERLAP_TID = 100_000
"""tid offset of a rank's second track: events that would overlap another event of its track partially (an op
of another thread), which one track cannot show nested."""
OPEN_HOW = (
    "open it in https://ui.perfetto.dev (Open trace file: the file is read in the browser, not uploaded) "
    "or in chrome://tracing (Load)"
)
OPS_NOTE = (
    "ops: every call of a torch.distributed function (collectives, p2p, barrier; the journal, "
    "suite/harness/journal/), from the call to its return: for an async op (isend/irecv, async_op=True) that is "
    "its issue, not its completion. bytes: the first tensor argument's size. Ops issued below those functions "
    "are not seen: DistributedDataParallel's own bucket all_reduces (without a communication hook) and DTensor's "
    "functional collectives lie inside their step's sample span"
)
COMPUTE_NOTE = (
    "compute: the harness cannot see inside an experiment's step; in a 'step' (the timed sample of a case whose "
    "time includes more than its ops: a DDP or sharded training step) the spans between the step's ops are drawn "
    "as compute (forward, backward, optimizer and any op the journal does not see); a step without journaled ops "
    "is one span"
)


def read_parts(run_dir: Path) -> tuple[dict[int, dict], dict[int, dict]]:
    """(rank -> its timeline part, rank -> its journal dump) as the run left them (unreadable ones skipped); a rank
    that left neither (Gloo aborted it, torchrun ended it while it wrote) is read from its journal's ring file."""

    def load(pattern: str) -> dict[int, dict]:
        out = {}
        for p in sorted(run_dir.glob(pattern)):
            try:
                d = json.loads(p.read_text())
                out[int(d["rank"])] = d
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    parts, dumps = load("trace/rank*.json"), load("hang/rank*.json")
    for p in sorted(run_dir.glob("hang/rank*.ring")):  # a rank ended before it wrote either: its ring file
        r = int(p.stem.removeprefix("rank"))
        if r not in parts and "unix_minus_clock" not in dumps.get(r, {}) and (ring := journal_ring.read(p, r)):
            dumps[r] = ring
    return parts, dumps


def _rank_ops(part: dict | None, dump: dict | None) -> tuple[list[dict], float, float, str]:
    """One rank's ops (each with ``clock``, ``end_clock``), when it last wrote (its clock), its clock's Unix
    offset, and what its record is."""
    ops: dict[float, dict] = {}
    offset, last, what = 0.0, float("-inf"), []
    sources = []
    if part is not None:
        fields = part["op_fields"]
        sources.append((part["written_clock"], [dict(zip(fields, row)) for row in part["ops"]], part))
    if dump is not None and "unix_minus_clock" in dump:  # (a dump of an older suite has no clock)
        sources.append((dump["time_unix"] - dump["unix_minus_clock"], dump.get("tail") or [], dump))
    for written, entries, src in sorted(sources, key=lambda s: s[0]):  # the newer record of an op wins
        offset = src["unix_minus_clock"]
        last = max(last, written)
        if src["reason"] not in what:
            what.append(src["reason"][:160])
        for e in entries:
            ops[e["clock"]] = e
    return sorted(ops.values(), key=lambda e: e["clock"]), last, offset, "; then ".join(what)


def _short_case(case: str) -> str:
    """A case's test id (``all_reduce-sum-float32-1K``), or its node id when it has none."""
    return case[case.index("[") + 1 : -1] if case.endswith("]") and "[" in case else case


def build(parts: dict[int, dict], dumps: dict[int, dict]) -> dict:
    """The Chrome trace (a dict) of the ranks' parts and dumps."""
    ranks = sorted(set(parts) | {r for r, d in dumps.items() if "unix_minus_clock" in d})
    hosts: dict[str, int] = {}
    per_rank = {}
    for r in ranks:
        ops, last, offset, what = _rank_ops(parts.get(r), dumps.get(r))
        src = parts.get(r) or dumps[r]
        host = src.get("host", "?")
        hosts.setdefault(host, len(hosts) + 1)
        per_rank[r] = {"ops": ops, "last": last, "offset": offset, "what": what, "host": host}
    # The ranks of a host share its perf_counter: one offset per host keeps them exactly aligned. Times are
    # moved onto the first host's clock (by the difference of the hosts' offsets) and start at 0 there.
    host_offset: dict[str, float] = {}
    for r in ranks:
        host_offset.setdefault(per_rank[r]["host"], per_rank[r]["offset"])
    ref = next(iter(host_offset.values()), 0.0)
    delta = {h: off - ref for h, off in host_offset.items()}
    starts = [
        min(t) + delta[per_rank[r]["host"]]
        for r in ranks
        if (t := [o["clock"] for o in per_rank[r]["ops"]] + [s[2] for s in (parts.get(r) or {}).get("spans", [])])
    ]
    zero = min(starts, default=0.0)
    epoch = ref + zero
    events: list[dict] = []
    for host, pid in hosts.items():
        events.append(_meta("process_name", pid, 0, {"name": f"host {host}"}))
        events.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))
    dropped, ranks_note = {}, {}
    for r in ranks:
        info = per_rank[r]
        pid, shift = hosts[info["host"]], delta[info["host"]] - zero
        events.append(_meta("thread_name", pid, r + 1, {"name": f"rank {r}"}))
        events.append(_meta("thread_sort_index", pid, r + 1, {"sort_index": r}))
        part = parts.get(r) or {}
        track = _rank_events(r, pid, shift, info, part)
        events += _nest(track, r)
        ranks_note[str(r)] = {"host": info["host"], "record": info["what"]}
        if part.get("dropped_ops") or part.get("dropped_spans"):
            dropped[str(r)] = {
                "ops": part.get("dropped_ops", 0),
                "spans": part.get("dropped_spans", 0),
                "cases_cut": len(part.get("dropped_ops_by_case") or {}),
            }
    bounds = next((p["bounds"] for p in parts.values() if "bounds" in p), {})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "what": "the run's timeline: each rank's cases, phases, timed samples and torch.distributed ops",
            "how_to_open": OPEN_HOW,
            "clock": (
                "ts 0 is epoch_unix_s; every rank timed itself with time.perf_counter, which the ranks of one host "
                "share (their events are aligned exactly); across hosts each host's clock is its own, converted "
                "through its time.time(): hosts are only as aligned as their clocks are synchronised (NTP)"
            ),
            "epoch_unix_s": epoch,
            "bound": (
                f"at most {bounds.get('ops_per_case', '?')} ops per case (its first) and {bounds.get('ops_max', '?')} "
                f"per rank, at most {bounds.get('spans_max', '?')} spans (cases, phases, samples) per rank and "
                f"{bounds.get('samples_per_case', '?')} sample spans per case; a rank's last ops (its journal's "
                "ring) are always kept"
            ),
            "dropped": (
                "events past the bound were dropped: "
                + "; ".join(
                    f"rank {r}: {d['ops']} ops (in {d['cases_cut']} cases, each marked by an instant "
                    f"'ops dropped'), {d['spans']} span(s)"
                    for r, d in dropped.items()
                )
                if dropped
                else "none: every op and span the ranks recorded is here"
            ),
            "ops": OPS_NOTE,
            "compute": COMPUTE_NOTE,
            "ranks": ranks_note,
            "missing_ranks": _missing(parts, ranks),
        },
    }


def _missing(parts: dict, ranks: list[int]) -> str:
    """Ranks that left no timeline part: only their journal's last ops are here, or nothing."""
    world = max((p.get("world_size") or 0 for p in parts.values()), default=0)
    only_tail = [r for r in ranks if r not in parts]
    gone = [r for r in range(world) if r not in ranks]
    out = []
    if only_tail:
        out.append(f"rank(s) {', '.join(map(str, only_tail))} left no timeline part: only their journal's last ops")
    if gone:
        out.append(f"rank(s) {', '.join(map(str, gone))} left nothing (ended before they could write: see failures/)")
    return "; ".join(out)


def _meta(name: str, pid: int, tid: int, args: dict) -> dict:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": args}


def _us(clock: float, shift: float) -> float:
    return round((clock + shift) * 1e6, 3)


def _x(name: str, cat: str, pid: int, tid: int, ts: float, end: float, args: dict | None = None) -> dict:
    ev = {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": round(max(0.0, end - ts), 3)}
    if args:
        ev["args"] = args
    return ev


def _rank_events(r: int, pid: int, shift: float, info: dict, part: dict) -> list[dict]:
    tid = r + 1
    out = []
    for cat, name, start, end, args in part.get("spans", []):
        out.append(_x(name, cat, pid, tid, _us(start, shift), _us(end, shift), args))
    for o in info["ops"]:
        end = o["end_clock"] if o["end_clock"] is not None else max(info["last"], o["clock"])
        args = {k: o[k] for k in ("op", "group", "seq", "bytes") if o.get(k) is not None}
        args["case"] = _short_case(o["case"] or "")
        if o.get("peer") is not None:
            args["peer"] = o["peer"]
        if o.get("dtype") is not None:
            args["dtype"], args["shape"] = o["dtype"], o["shape"]
        if o["state"] != "completed":
            running = " (still in the op when the rank last wrote)" if o["end_clock"] is None else ""
            args["state"] = o["state"] + running
        out.append(_x(o["op"], "op", pid, tid, _us(o["clock"], shift), _us(end, shift), args))
    for case, cut in (part.get("dropped_ops_by_case") or {}).items():  # where a case's ops stopped being kept
        if cut["after_clock"] is not None:
            args = {"case": _short_case(case), "dropped_ops": cut["ops"]}
            ts = _us(cut["after_clock"], shift)
            out.append(
                {
                    "ph": "i",
                    "name": "ops dropped",
                    "cat": "bound",
                    "s": "t",
                    "pid": pid,
                    "tid": tid,
                    "ts": ts,
                    "args": args,
                }
            )
    return out


def _nest(events: list[dict], rank: int) -> list[dict]:
    """Events of one track, ordered and properly nested (a child within its parent); an event that would
    overlap an open one partially goes to the rank's second track (``OVERLAP_TID``), and compute spans fill the
    gaps between the ops of a training step."""
    order = sorted(events, key=lambda e: (e["ts"], -e.get("dur", 0.0), e["ph"] != "X"))
    out, stack, moved = [], [], []
    for e in order:
        if e["ph"] != "X":
            out.append(e)
            continue
        end = e["ts"] + e["dur"]
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + 0.001:  # ended: within 1 ns (rounding)
            stack.pop()
        if stack and end > stack[-1]["ts"] + stack[-1]["dur"] + 0.001:
            moved.append({**e, "tid": OVERLAP_TID + rank + 1})
            continue
        if stack and end > stack[-1]["ts"] + stack[-1]["dur"]:  # rounding: within 1 ns of its parent's end
            e["dur"] = round(stack[-1]["ts"] + stack[-1]["dur"] - e["ts"], 3)
        e["_parent"] = stack[-1] if stack else None
        stack.append(e)
        out.append(e)
    out += _compute(out)
    for e in out:
        e.pop("_parent", None)
    if moved:
        pid = moved[0]["pid"]
        out.append(_meta("thread_name", pid, OVERLAP_TID + rank + 1, {"name": f"rank {rank}: overlapping events"}))
        out += _nest_simple(moved)
    return out


def _nest_simple(events: list[dict]) -> list[dict]:
    """The second track: what still overlaps there is dropped (no trace viewer can nest it)."""
    out, end = [], float("-inf")
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        if e["ts"] >= end:
            out.append(e)
            end = e["ts"] + e["dur"]
    return out


def _compute(events: list[dict]) -> list[dict]:
    """Compute spans: the gaps between the ops inside each training step (a sample named ``step``)."""
    children: dict[int, list[dict]] = {}
    for e in events:
        parent = e.get("_parent")
        if e.get("cat") == "op" and parent is not None and parent["cat"] == "sample" and parent["name"] == "step":
            children.setdefault(id(parent), []).append(e)
    out = []
    steps = {id(e): e for e in events if e.get("cat") == "sample"}
    for key, ops in children.items():
        s = steps[key]
        t = s["ts"]
        for o in [*ops, None]:
            start = s["ts"] + s["dur"] if o is None else o["ts"]
            if start - t >= 1.0:  # gaps under 1 µs are the harness's own bookkeeping
                out.append(_x("compute", "compute", s["pid"], s["tid"], round(t, 3), round(start, 3)))
            if o is not None:
                t = max(t, o["ts"] + o["dur"])
    return out


def write_trace(run_dir: str | Path) -> Path | None:
    """Merge the run's timeline parts into ``<run>/trace.json``; its path, or None when no rank left a part (or
    the merge failed: a timeline never changes a run's outcome).

    The run keeps one copy: once the trace holds a part of every rank of the world, the parts
    (``trace/rank*.json``) are folded into it and removed. A run whose parts are gone keeps its trace: a later
    merge (another node's launcher, ``python -m suite.postmortem.trace RUN``) finds no part and leaves it as it is.
    Parts of a world that is not all there (a rank killed, another node not yet written) stay for a later merge."""
    run_dir = Path(run_dir)
    path = run_dir / TRACE
    try:
        parts, dumps = read_parts(run_dir)
        if not parts and path.is_file():
            return path
        if not parts and not any("unix_minus_clock" in d for d in dumps.values()):
            return None
        doc = build(parts, dumps)
        write_text_atomic(path, json.dumps(doc, separators=(",", ":")), durable=False)
        world = max((p.get("world_size") or 0 for p in parts.values()), default=0)
        if world and set(range(world)) <= set(parts):
            _fold(run_dir)
        return path
    except Exception as e:  # noqa: BLE001 - the trace is a picture of the run, never its verdict
        print(f"# warning: the run's trace was not written ({type(e).__name__}: {e})", file=sys.stderr, flush=True)
        return None


def _fold(run_dir: Path) -> None:
    """Remove the parts ``trace.json`` now holds, and their folder once empty."""
    for p in run_dir.glob("trace/rank*.json"):
        p.unlink(missing_ok=True)
    try:
        (run_dir / "trace").rmdir()
    except OSError:  # something else in it: left as it is
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m suite.postmortem.trace RUN_DIR", file=sys.stderr)
        return 2
    path = write_trace(argv[0])
    if path is None:
        print(f"error: {argv[0]} holds no timeline part (trace/rank*.json)", file=sys.stderr)
        return 2
    print(f"trace: {path} ({OPEN_HOW})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
