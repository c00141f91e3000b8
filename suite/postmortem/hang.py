"""The launcher's hang diagnosis: which rank is where, and the one line that names the divergence.

When a rank reports a failure (an op timed out, a peer went silent) or dies, the launcher
asks every rank for its journal (suite/harness/journal/__init__.py: ``<run>/hang/request``), waits a
few seconds for ``<run>/hang/rank<r>.json`` (and for the faulthandler stacks a rank killed
by a fatal signal left in ``rank<r>.fatal``), then writes
ONE diagnosis, before the processes are ended, to ``<run>/failures/hang.txt`` and
``hang.json``: per rank the last op it issued (process group, c10d sequence number, op,
shape, case), whether it completed, and where the rank is (its innermost frame in the
suite or an experiment); then a verdict such as::

    ranks 0,2 wait in all_reduce #57 (case ...); rank 1 never entered it: at suite/harness/runner.py:240 in diverge

``diagnose`` is a pure function of the dumps (unit-tested on synthetic ones).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from suite.common import journal_ring
from suite.postmortem import divergence
from suite.common import failures, flight_recorder
from suite.common.fileio import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]  # the checkout: suite/postmortem/ is two levels down
DUMP_WAIT_S = 4.0
"""How long the launcher waits for the ranks' dumps (a rank's journal thread answers within 0.25 s)."""
_SKIP_FILES = (  # the journal's own frames (its wrappers, its check, its dump) say nothing of the hang
    "suite/harness/journal/__init__.py",
    "suite/harness/journal/wrap.py",
    "suite/harness/journal/check.py",
    "suite/harness/journal/dump.py",
    "suite/common/failures.py",
    "suite/harness/plant/below.py",  # a divergence planted below the harness: where it was called from is the place
    "suite/harness/mpi/group.py",  # BACKEND=mpi: a Work's wait polls MPI there; its caller is the one waiting
)


def request_dumps(run_dir: Path, why: str) -> None:
    """Ask every rank that watches ``run_dir`` for its journal (a new stamp is a new request)."""
    d = run_dir / "hang"
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / ".request.tmp"
    tmp.write_text(f"{time.time():z.3f} {why}\n")
    tmp.replace(d / "request")


def read_dumps(run_dir: Path) -> tuple[dict[int, dict], dict[int, list]]:
    """The ranks' journal dumps and, for ranks that died of a fatal signal, faulthandler's main-thread frames."""
    dumps, fatal = {}, {}
    for p in sorted((run_dir / "hang").glob("rank*.json")):
        try:
            d = json.loads(p.read_text())
            dumps[int(d["rank"])] = d
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for p in sorted((run_dir / "hang").glob("rank*.fatal")):
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        if text.strip():
            fatal[int(p.stem.removeprefix("rank"))] = parse_faulthandler(text)
    for r in dumps:  # a rank that answered and was ended afterwards (SIGTERM) is described by its journal
        if r in fatal and fatal[r]["error"] is None:
            del fatal[r]
    # What a rank issued, from its ring file: a rank a fatal signal ended (Gloo's abort), and once one did, the ranks
    # torchrun then ended (SIGTERM) before they answered. A SIGTERM with no abort is the first failure itself (a
    # rank killed from outside): a lost peer, whatever it had issued.
    aborted = any(f["error"] for f in fatal.values())
    for r, f in fatal.items():
        ring = journal_ring.read(run_dir / "hang" / f"rank{r}.ring", r) if r not in dumps and aborted else None
        if ring is not None:
            dumps[r] = {**ring, "threads": [{"name": "fatal", "main": True, "frames": f["frames"]}]}
    return dumps, fatal


def collect(run_dir: Path, world_size: int, why: str, wait_s: float = DUMP_WAIT_S) -> tuple[dict, dict]:
    """Request the dumps and wait (at most ``wait_s``) until every rank has answered, died or been named lost in
    a failure note (its heartbeat stopped: it answers nothing)."""
    request_dumps(run_dir, why)
    deadline = time.monotonic() + wait_s
    while True:
        dumps, fatal = read_dumps(run_dir)
        lost = failures.reported_and_lost(run_dir)[1]
        if len(set(dumps) | set(fatal) | lost) >= world_size or time.monotonic() > deadline:
            return dumps, fatal
        time.sleep(0.2)


def parse_faulthandler(text: str) -> dict:
    """What faulthandler wrote: the fatal error (None for a registered signal such as SIGTERM) and the
    frames ``[file, line, function]`` (outermost first) of the main thread (the one not started by
    ``threading``)."""
    fatal = re.search(r"Fatal Python error: (.+)", text)
    blocks = re.split(r"\n\s*\n(?=(?:Current thread|Thread) 0x)", text)
    stacks = [list(reversed(re.findall(r'File "([^"]+)", line (\d+) in (\S+)', b))) for b in blocks]
    stacks = [st for st in stacks if st]
    main = next((st for st in stacks if st[0][2] != "_bootstrap"), stacks[-1] if stacks else [])
    return {"error": fatal.group(1).strip() if fatal else None, "frames": [[f, int(n), fn] for f, n, fn in main]}


def where(frames: list) -> str:
    """The innermost frame in the project (an experiment or the suite), else the innermost one."""

    def rel(f: str) -> str:
        try:
            return str(Path(f).resolve().relative_to(ROOT))
        except ValueError:
            return f

    for f, line, fn in reversed(frames):
        r = rel(f)
        if not r.startswith("/") and not r.startswith(".venv") and not r.endswith(_SKIP_FILES):
            return f"{r}:{line} in {fn}"
    return f"{rel(frames[-1][0])}:{frames[-1][1]} in {frames[-1][2]}" if frames else "?"


def _main_frames(d: dict) -> list:
    threads = d.get("threads") or []
    main = next((t for t in threads if t.get("main")), None)
    return main["frames"] if main else []


def rank_state(d: dict, group: str | None = None) -> dict:
    """One rank's position on ``group`` (default: the group of its last op): live sequence number, the op
    at it (if journaled), waiting or not, and for how long (seconds before the dump)."""
    tail = d.get("tail") or []
    group = group or (tail[-1]["group"] if tail else "0")
    seq = (d.get("seq") or {}).get(group)
    at = next((e for e in reversed(tail) if e.get("group") == group and e.get("seq") == seq), None)
    waiting = at is None or at.get("state") in ("entered", "failed", "issued")
    return {
        "rank": d["rank"],
        "host": d.get("host", "?"),
        "group": group,
        "seq": seq,
        "op": at.get("op") if at else None,
        "shape": at.get("shape") if at else None,
        "peer": at.get("peer") if at else None,
        "case": (at or {}).get("case") or d.get("case", ""),
        "state": at.get("state") if at else None,
        "waiting": waiting and seq is not None and seq > 0,
        "age_s": d.get("time_unix", 0) - at["time_unix"] if at and at.get("time_unix") else None,
        "where": where(_main_frames(d)),
        "case_ops": d.get("case_ops") or {},
        "tail": tail,
    }


def _op(s: dict) -> str:
    if s["op"] is None:
        return f"an op the journal did not see #{s['seq']}"
    peer = f" (peer {s['peer']})" if s["peer"] is not None else ""
    return f"{s['op']} #{s['seq']}{peer}"


def _ranks(rs) -> str:
    rs = sorted(rs)
    return f"rank{'s' if len(rs) > 1 else ''} {','.join(map(str, rs))}"


def _wait(rs, verb: str = "wait") -> str:
    rs = sorted(rs)
    return f"{_ranks(rs)} {verb}{'s' if len(rs) == 1 and verb == 'wait' else ''}"


def diagnose(dumps: dict[int, dict], fatal: dict[int, dict], world_size: int) -> dict:
    """Per-rank lines and one verdict from the ranks' dumps; ``kind`` is divergence, died, hang or unknown."""
    states = [rank_state(dumps[r]) for r in sorted(dumps)]
    if len({s["group"] for s in states}) > 1:  # the ranks' last ops are on different groups: compare the default one
        states = [rank_state(dumps[r], "0") for r in sorted(dumps)]
    lines = []
    for s in states:
        now = f"waits in {_op(s)}" if s["waiting"] else f"last issued {_op(s)} (completed)"
        now = f"{_how(fatal[s['rank']])}: in {_op(s)}" if s["rank"] in fatal else now
        lines.append(f"rank {s['rank']} ({s['host']}): {now}, case {s['case'] or '?'}; at {s['where']}")
    dead = sorted(fatal)
    silent = [r for r in range(world_size) if r not in dumps and r not in fatal]
    lines += [f"rank {r}: {_ended(fatal[r])}" for r in dead if r not in dumps]
    lines += [f"rank {r}: did not answer (frozen, or ended before it could)" for r in silent]

    def row(rank, host, state, op="", case="", at="?"):
        return {"rank": rank, "host": host, "state": state, "op": op, "case": case, "where": at}

    table = [
        row(
            s["rank"],
            s["host"],
            _how(fatal[r]) if (r := s["rank"]) in fatal else _state(s),
            _op(s),
            s["case"],
            s["where"],
        )
        for s in states
    ]
    table += [row(r, "?", _how(fatal[r]), at=where(fatal[r]["frames"])) for r in dead if r not in dumps]
    table += [row(r, "?", "did not answer") for r in silent]
    table.sort(key=lambda row: row["rank"])
    kind, verdict = _diverged(states, dead) or _verdict(states, dead)
    gone = [f"rank {r} {_ended(fatal[r])}" for r in dead]
    if silent:
        gone.append(f"{_ranks(silent)} did not answer (frozen or gone)")
    if gone:
        # A rank that did not answer is frozen or gone (heartbeat's "a peer was lost"): where the others
        # stopped follows from it, so their different ops are not a divergence. A rank that died (Gloo
        # aborts on a size mismatch) where the journals differ keeps the divergence, which leads the verdict.
        kind = "died" if silent or kind != "divergence" else kind
        parts = [verdict, *gone] if kind == "divergence" else [*gone, verdict]
        verdict = "; ".join(p for p in parts if p)
    verdict = verdict or "no rank left a journal"
    return {"kind": kind, "verdict": verdict, "ranks": lines, "table": table, "states": states}


def _how(f: dict) -> str:
    """How a rank that left only faulthandler's stacks ended, and in what (its innermost function)."""
    frames = f["frames"]
    inner = f" in {frames[-1][2]}" if frames else ""
    return f"died ({f['error']}){inner}" if f["error"] else f"was ended by a signal (SIGTERM){inner}"


def _ended(f: dict) -> str:
    return f"{_how(f)} at {where(f['frames'])}"


def _verdict(states: list[dict], dead: list[int]) -> tuple[str, str]:
    live = [s for s in states if s["seq"] is not None]
    if not live:
        return "unknown", ""
    top = max(s["seq"] for s in live)
    front = [s for s in live if s["seq"] == top]
    behind = [s for s in live if s["seq"] < top]
    if behind and any(s["waiting"] for s in front):  # a rank that completed the op waits for nobody
        front = [s for s in front if s["waiting"]]
    head = front[0]
    case = f" (case {head['case']})" if head["case"] else ""
    if behind and not head["waiting"]:  # ahead, not held up: nobody waits for the others
        return "unknown", (
            f"no rank waits on another: {_ranks(s['rank'] for s in front)} completed {_op(head)}{case}, "
            f"{_ranks(s['rank'] for s in behind)} had not reached it"
        )
    if behind:
        where_ = "; ".join(f"{_who(s, states)} at {s['where']}" for s in behind)
        return "divergence", (
            f"{_wait(s['rank'] for s in front)} in {_op(head)}{case}; "
            f"{_ranks(s['rank'] for s in behind)} never entered it: {where_}"
        )
    if all(s["waiting"] for s in front):
        if dead:
            return "died", f"{_wait((s['rank'] for s in front), 'waited')} in {_op(head)}{_shape(head)}{case}"
        return "hang", (
            f"every rank that answered waits in {_op(head)}{case}: none is missing from it "
            "(a slow or partitioned peer, or a deadlock inside the backend)"
        )
    return "unknown", f"no rank waits on another: every rank that answered is past {_op(head)}"


def _who(s: dict, states: list[dict]) -> str:
    """``rank 1``, with its host when the ranks run on several (compose, Slurm): the node to look at."""
    several = len({x["host"] for x in states}) > 1
    return f"rank {s['rank']} (host {s['host']})" if several else f"rank {s['rank']}"


def _shape(s: dict) -> str:
    return f" {s['shape']}" if s["shape"] is not None else ""


def _state(s: dict) -> str:
    return "waiting" if s["waiting"] else "completed"


def _diverged(states: list[dict], dead: list[int]) -> tuple[str, str] | None:
    """The verdict at the first op the ranks' journals differ at (suite/postmortem/divergence.py), None if none."""
    found = divergence.first_difference(states)
    if found is None:
        return None
    seq, at = found
    odd, how = divergence.culprits(states, seq, at)
    by = {s["rank"]: s for s in states}

    def op(r) -> str:
        e = at[r]
        return _op({**e, "seq": seq}) + _shape(e)

    def one(r) -> str:
        e, s = at[r], by[r]
        verb = "died in" if r in dead else "is in" if e.get("state") in ("entered", "failed", "issued") else "issued"
        here = f" at {s['where']}" if s["seq"] == seq else ""  # where it is now is where it issued that op
        return f"{_who(s, states)} {verb} {op(r)}{here}"

    case = f" (case {at[min(at)].get('case') or by[min(at)]['case']})"
    if not odd:
        each = "; ".join(one(r) for r in sorted(at))
        return (
            "divergence",
            f"{_ranks(at)} issued different ops at #{seq}{case}: {each}; which diverged cannot be told ({how})",
        )
    ref = [r for r in sorted(at) if r not in odd]
    live = all(r not in dead and at[r].get("state") in ("entered", "failed") for r in ref)
    verb = _wait(ref) if live else f"{_ranks(ref)} {'died' if all(r in dead for r in ref) else 'issued'}"
    other = "op" if {at[r].get("op") for r in odd} != {at[ref[0]].get("op")} else "size"
    return "divergence", (
        f"{verb} in {op(ref[0])}{case}; {_ranks(odd)} issued a different {other} there"
        f" ({_TOLD[how]}): " + "; ".join(one(r) for r in odd)
    )


_TOLD = {
    "odd one out": "the odd one out",
    "unusual": "ops in an order no journal held before",
    "fewer": "one call of the case's op fewer",
}


def write(run_dir: Path, diag: dict, why: str) -> None:
    """``failures/hang.txt`` (what the launcher printed) and ``failures/hang.json`` (best effort)."""
    text = f"# hang diagnosis ({why}):\n" + render(diag).partition("\n")[2]
    try:
        (run_dir / "failures").mkdir(parents=True, exist_ok=True)
        (run_dir / "failures" / "hang.txt").write_text(text + "\n")
        write_json_atomic(
            run_dir / "failures" / "hang.json",
            {
                "why": why,
                "kind": diag["kind"],
                "verdict": diag["verdict"],
                "ranks": diag["ranks"],
                "table": diag.get("table", []),
                "flight_recorder": diag.get("flight_recorder"),
                "time_unix": time.time(),
            },
        )
    except OSError:
        pass


def diagnose_run(run_dir: Path, world_size: int, why: str, ask: bool = True) -> dict | None:
    """Collect the dumps (``ask``: request them first; else read what the ranks left), diagnose, write and
    return the diagnosis (None when no rank left anything)."""
    try:
        dumps, fatal = collect(run_dir, world_size, why) if ask else read_dumps(run_dir)
    except OSError:
        return None
    fr = flight_recorder.read(run_dir)
    if not dumps and not fatal and not fr:
        return None
    diag = diagnose(dumps, fatal, world_size)
    if fr:  # what the backend itself recorded (NCCL; Gloo's collectives too), read the same way
        for r, d in fr.items():  # the dump does not name the host; without its stack traces, the journal's
            d["host"] = (dumps.get(r) or {}).get("host", d["host"])
            if not _main_frames(d) and r in dumps:
                d["threads"] = dumps[r].get("threads")
        diag["flight_recorder"] = diagnose(fr, {}, world_size)["verdict"]
    write(run_dir, diag, why)
    return diag


def render(diag: dict) -> str:
    fr = [f"# flight recorder: {diag['flight_recorder']}"] if diag.get("flight_recorder") else []
    return "\n".join(["# hang diagnosis:", *[f"#   {x}" for x in diag["ranks"]], f"# {diag['verdict']}", *fr])


def tidy(run_dir: Path) -> None:
    """Remove what a run without a hang leaves in ``<run>/hang``: the empty fatal-signal files, the ring files
    (suite/common/journal_ring.py) unless a diagnosis read them, and the first-timed-step markers the injector read
    while the run went on (suite/common/timed_start.py; they say nothing of a hang)."""
    d = run_dir / "hang"
    try:
        for p in d.glob("rank*.timed"):
            p.unlink()
        for p in d.glob("rank*.fatal"):
            if p.stat().st_size == 0:
                p.unlink()
        for p in d.glob("rank*.ring") if not (run_dir / "failures" / "hang.json").exists() else ():
            p.unlink()
        d.rmdir()  # only if nothing else is left
    except OSError:
        pass
    try:
        (
            run_dir / "failures"
        ).rmdir()  # made for NCCL's dump on a timeout (suite/harness/journal/__init__.py), left empty
    except OSError:
        pass


def read_verdict(run_dir: Path) -> dict | None:
    """The diagnosis the launcher wrote for this run, if any."""
    try:
        return json.loads((run_dir / "failures" / "hang.json").read_text())
    except (OSError, ValueError):
        return None
