"""``python -m suite.postmortem.replay RUN [--case TEXT] [--what-if SPEC,...]`` (``make what-if``): each training
case's step rebuilt as a dependency graph and replayed, as recorded, idealised and under the what-ifs asked for.

Writes ``<run>/what-if.json`` (every number modelled, but the measured step) and, per case, the ideal timeline
beside the run's own: ``<run>/what-if/<case>.ideal.json`` (Perfetto). Bad input is one line and status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

from suite.common.fileio import write_text_atomic
from suite.model import contention
from suite.postmortem.replay import graph, link, load, share, timeline, whatif
from suite.postmortem.replay.whatif import WhatIf, analyse, ideal_replay, median_transfers

PROVENANCE = {
    "measured_ms": "measured: the mean over the case's timed steps of the last rank's step end less the first "
    "rank's step start (the run's timeline)",
    "replayed_ms": "modelled: the step's dependency graph replayed unchanged (suite/postmortem/replay/graph.py)",
    "replay_error_pct": "derived: |replayed - measured| / measured",
    "ops_matched_on": "how the ranks' ops were matched: on their process group and c10d sequence number (the "
    "run's flight-recorder record beside its profiles), else on their names and order",
    "recorded_ms": "measured: the mean of the case's timed samples in the run's record (bench.json samples_us)",
    "replay_error_vs_record_pct": "derived: |replayed - recorded| / recorded",
    "ideal_ms": "modelled: the step replayed idealised (median compute per segment across ranks, median transfer "
    "per op over ranks and steps, ranks starting together; the compute at the cores' share of all ranks computing "
    "at once where contention names the model)",
    "slowdown": "modelled: S = replayed / ideal",
    "slowdown_by_op_type": "modelled: replayed / the step with only that type's durations idealised",
    "M_W_pct": "modelled: per rank, the share of replayed - ideal that idealising that rank's durations alone "
    "removes, within 0..100 (None: no slowdown, under 1% of the step)",
    "M_S_pct": "modelled: M_W per pipeline stage (one rank per stage; None: not a pipeline)",
    "contention": "the model of the compute's share of the cores in the idealised step and the what-ifs "
    "(suite/postmortem/replay/share.py), applied where the run's ranks outnumbered a host's usable cores "
    "(bench.json machine_info cpu_share), else none: the compute as recorded",
    "whatifs": "modelled: the step replayed with the change; a rank's compute segments scaled by the factor (the "
    "added compute on a core of its own where contention names the model); a "
    "link's α–β bandwidth term c_β·S/β of each op that crosses it scaled, the rest of the transfer kept "
    "(suite/postmortem/replay/link.py; each link what-if's priced says with what β and S); N ranks: the idealised "
    "step with each transfer moved by the ring model from n to N ranks, the compute a probe's at N where the ranks "
    "outnumber the cores (priced says how, or why not: step_ms None)",
}


class Refused(Exception):
    pass


def parse_whatifs(text: str) -> list[WhatIf]:
    """``rank:<r>:<k>``, ``link:<a>-<b>:<k>`` and ``ranks:<N>``, comma-separated (k: times slower; under 1:
    faster; N: ranks instead of the run's)."""
    out = []
    for item in filter(None, (t.strip() for t in (text or "").split(","))):
        parts = item.split(":")
        if parts[0] == "ranks":
            if len(parts) != 2 or not parts[1].isdigit() or int(parts[1]) < 2:
                raise Refused(f"WHATIF={item}: expected ranks:<N>, N a whole number of ranks from 2")
            out.append(WhatIf("ranks", (int(parts[1]),)))
            continue
        if len(parts) != 3 or parts[0] not in ("rank", "link"):
            raise Refused(f"WHATIF={item}: expected rank:<r>:<k>, link:<a>-<b>:<k> or ranks:<N>")
        try:
            factor = float(parts[2])
            target = tuple(int(x) for x in parts[1].split("-"))
        except ValueError:
            raise Refused(f"WHATIF={item}: the rank(s) and the factor must be numbers") from None
        if not factor > 0 or factor == float("inf"):
            raise Refused(f"WHATIF={item}: the factor must be a number above 0, got {parts[2]}")
        if len(target) != (1 if parts[0] == "rank" else 2) or (parts[0] == "link" and target[0] == target[1]):
            raise Refused(f"WHATIF={item}: a rank is one number, a link two different ranks a-b")
        out.append(WhatIf(parts[0], target, factor))
    return out


def _check_targets(whatifs: list[WhatIf], ranks: set[int]) -> None:
    for w in (w for w in whatifs if w.kind != "ranks"):
        unknown = [r for r in w.target if r not in ranks]
        if unknown:
            what = "rank" if w.kind == "rank" else f"link {w.target[0]}-{w.target[1]}: rank"
            raise Refused(f"{what} {unknown[0]} does not exist (the run has ranks {min(ranks)}-{max(ranks)})")


def case_graphs(run: Path, case: str, spans: dict) -> tuple[list[graph.Graph], list[str]]:
    """The case's step graphs and why each step that could not be rebuilt was not."""
    graphs, skipped = [], []
    for step in load.case_steps(run, case, spans):
        try:
            graphs.append(graph.build(step))
        except ValueError as e:
            skipped.append(str(e))
    return graphs, skipped


def _at_ranks(run: Path, case: str, w: WhatIf, graphs: list, probe: Path | None) -> tuple[WhatIf, str]:
    """The "N ranks" what-if ``w`` priced (its ``at``; None: not priced) and how, one line: the transfers on the
    ring model (link.price_ranks); the compute a probe's at N ranks where one is given, else each rank's own, which
    leaves out the wait for a core where N ranks (spread over the run's hosts) outnumber a host's cores."""
    n_to = w.target[0]
    if not whatif.spans_every_rank(graphs):
        return w, "not priced: the step has collectives on groups smaller than its world (at N: a mesh's groups)"
    peers = {k: rs for g in graphs for k, rs in g.peers.items()}
    extra, how = link.price_ranks(run, case, n_to, peers)
    if extra is None:
        return w, how
    if probe is not None:
        spans = load.step_spans(load.read_timeline(probe)).get(case)
        probe_graphs = case_graphs(probe, case, spans)[0] if spans else []
        if not probe_graphs or len(probe_graphs[0].ranks) != n_to:
            return w, f"not priced: the probe {probe} has no rebuilt step of {case} at {n_to} ranks"
        compute = whatif.probe_compute(probe_graphs, set(peers))
        if compute is None:
            return w, f"not priced: the probe's ops of {case} are not the step's"
        what = f"the probe's ({probe.name}), measured on all {n_to} ranks at once"
        return dataclasses.replace(w, at=whatif.AtRanks(extra, compute)), f"{how}; compute: {what}"
    record = _record(run)
    hosts = max(1, len((((record.get("machine_info") or {}).get("suite") or {}).get("hosts") or {})))
    per_host, cores = -(-n_to // hosts), contention.run_cores(record, one_machine=False)[1]
    note = "each rank's own, as recorded"
    if contention.outnumbered((per_host, cores)):
        note += contention.NO_PROBE.format(n=n_to, ranks=per_host, cores=contention.cores_text(cores))
    return dataclasses.replace(w, at=whatif.AtRanks(extra)), f"{how}; compute: {note}"


def _record(run: Path) -> dict:
    try:
        return json.loads((run / "bench.json").read_text())
    except (OSError, ValueError):
        return {}


def contend(run: Path, case: str, graphs: list[graph.Graph], one_machine: bool = False) -> str:
    """Price the graphs' compute with the cores' share (share.py) where the run's ranks outnumbered a host's
    cores (``one_machine``: its hosts are containers of one machine, as the compose simulation's, whose ranks all
    share that machine's cores); what was done, one line for the record."""
    ranks, cores = contention.run_cores(_record(run), one_machine=one_machine)
    if not contention.outnumbered((ranks, cores)):
        return "none: the ranks did not outnumber the cores (or the run does not say), the compute as recorded"
    busy = load.busy_intervals(run, case, list(graphs[0].ranks))
    if set(busy) != set(graphs[0].ranks):
        return f"none: {ranks} ranks shared {contention.cores_text(cores)}, but a rank's profile has no CPU ops"
    share.attach(graphs, busy, cores, ranks)
    return f"{share.MODEL} ({ranks} ranks shared {contention.cores_text(cores)})"


def case_result(
    run: Path, case: str, spans: dict, whatifs: list[WhatIf], probe: Path | None = None, one_machine: bool = False
) -> tuple[dict, dict | None]:
    """One case's numbers and its ideal timeline (None: no step could be rebuilt)."""
    graphs, skipped = case_graphs(run, case, spans)
    if not graphs:
        return {"case": case, "steps": 0, "skipped": skipped[:3]}, None
    pipeline = any(k[0].startswith("p2p ") for k in graphs[0].order)
    stages = {r: [r] for r in graphs[0].ranks} if pipeline else None
    peers = {k: rs for g in graphs for k, rs in g.peers.items()}
    prices = [link.price(run, case, w.target, peers) if w.kind == "link" else None for w in whatifs]
    whatifs = [w if p is None else dataclasses.replace(w, wire=p.wire) for w, p in zip(whatifs, prices)]
    hows = [p.how if p is not None else None for p in prices]
    for i, w in enumerate(whatifs):
        if w.kind == "ranks":
            whatifs[i], hows[i] = _at_ranks(run, case, w, graphs, probe)
    contended = contend(run, case, graphs, one_machine)
    out = {"case": case, **analyse(graphs, whatifs, stages), "steps_skipped": len(skipped), "contention": contended}
    out["ops_matched_on"] = graphs[0].matched_on if len({g.matched_on for g in graphs}) == 1 else graph.BY_NAME
    for entry, how in zip(out["whatifs"], hows):
        if how is not None:
            entry["priced"] = how
    recorded = load.recorded_step_s(run, case)
    out["recorded_ms"] = None if recorded is None else round(recorded * 1e3, 4)
    out["replay_error_vs_record_pct"] = (
        None if recorded is None else round(100 * abs(out["replayed_ms"] / 1e3 - recorded) / recorded, 2)
    )
    times = [graph.replay(g).time for g in graphs]
    g = graphs[times.index(statistics.median_low(times))]
    trace = timeline.chrome_trace(g, graph.replay(g), ideal_replay(g, median_transfers(graphs)), case)
    return out, trace


def _ms(x) -> str:
    return "-" if x is None else f"{x:z.3f}"


def _lines(r: dict) -> list[str]:
    if not r.get("steps"):
        return [f"{r['case']}: no step could be rebuilt ({'; '.join(r.get('skipped') or ['no timed step'])})"]
    mw = ", ".join(f"rank {k}: {'-' if v is None else f'{v:zg}%'}" for k, v in r["M_W_pct"].items())
    out = [
        f"{r['case']}: {r['steps']} steps ({r['steps_skipped']} skipped); measured {_ms(r['measured_ms'])} ms, "
        f"replayed (modelled) {_ms(r['replayed_ms'])} ms (error {r['replay_error_pct']}%; against the record's "
        f"{_ms(r['recorded_ms'])} ms: {_ms(r['replay_error_vs_record_pct'])}%)",
        f"  ops matched across ranks on {r['ops_matched_on']}",
        f"  idealised (no straggler, modelled) {_ms(r['ideal_ms'])} ms: slowdown S = {r['slowdown']}; per op type: "
        + ", ".join(f"{k} {v}" for k, v in r["slowdown_by_op_type"].items()),
        f"  M_W (modelled share of the slowdown per rank): {mw}",
        f"  compute on shared cores: {r.get('contention', 'none')}",
    ]
    if r["M_S_pct"] is not None:
        out.append(
            "  M_S (modelled, per pipeline stage): "
            + ", ".join(f"stage {k}: {'-' if v is None else f'{v:zg}%'}" for k, v in r["M_S_pct"].items())
        )
    out += [
        f"  what if {w['what']}: {_ms(w['step_ms'])} ms ({w['vs_replayed']}x the replayed step, modelled)"
        if w["step_ms"] is not None
        else f"  what if {w['what']}: {w.get('priced', 'not priced')}"
        for w in r["whatifs"]
    ]
    return out


def run(run_dir: Path, case_text: str, whatif_text: str, probe: Path | None = None, one_machine: bool = False) -> int:
    whatifs = parse_whatifs(whatif_text)
    if not run_dir.is_dir():
        raise Refused(f"RUN={run_dir}: no such run folder")
    if probe is not None and not (probe / "trace.json").is_file():
        raise Refused(f"PROBE={probe}: not a run folder with a timeline (trace.json)")
    spans = load.step_spans(load.read_timeline(run_dir))
    cases = {c: s for c, s in spans.items() if case_text in c}
    if not cases:
        known = ", ".join(sorted(spans)) or "none: the run has no training step"
        raise Refused(f"CASE={case_text}: no training case of {run_dir} matches (its cases: {known})")
    _check_targets(whatifs, {r for s in cases.values() for r in s})
    results = []
    for case, s in sorted(cases.items()):
        r, trace = case_result(run_dir, case, s, whatifs, probe, one_machine)
        if trace is not None:
            path = run_dir / "what-if" / f"{load.profile_name(case)}.ideal.json"
            write_text_atomic(path, json.dumps(trace, separators=(",", ":")), durable=False)
            r["ideal_timeline"] = str(path.relative_to(run_dir))
        results.append(r)
        print("\n".join(_lines(r)))
    doc = {"run": run_dir.name, "provenance": PROVENANCE, "cases": results}
    write_text_atomic(run_dir / "what-if.json", json.dumps(doc, indent=1), durable=False)
    print(f"# what-if: {run_dir / 'what-if.json'}; ideal timelines in {run_dir / 'what-if'} (modelled; Perfetto)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m suite.postmortem.replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a run folder (results/<run>), run with PROFILE=1")
    ap.add_argument("--case", default="", help="only the training cases whose id contains this text")
    ap.add_argument("--what-if", default="", help="rank:<r>:<k>,link:<a>-<b>:<k>,ranks:<N> (k times slower)")
    ap.add_argument("--probe", default="", help="a profiled run of the same cases at N ranks (ranks:<N>'s compute)")
    ap.add_argument(
        "--one-machine",
        action="store_true",
        help="the run's hosts are containers of one machine (the compose simulation): all its ranks share its cores",
    )
    args = ap.parse_args(argv)
    if not args.run.strip():
        print("error: RUN= is required: a run folder (results/<run>), run with PROFILE=1", file=sys.stderr)
        return 2
    try:
        probe = Path(args.probe) if args.probe.strip() else None
        return run(Path(args.run), args.case, args.what_if, probe, args.one_machine)
    except (Refused, load.BadInput) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
