"""A profiled run cut down to what the what-if replay reads, small enough to keep as a test fixture.

    python scripts/trim_profiled_run.py RUN OUT

Writes into OUT: the timeline (``trace.json``) with only its cases, timed samples and barriers; each profile
(``profiles/<case>.rank<r>.json``) with only the backend's ops (``gloo:``, ``nccl:``, ``mpi:``), its clock anchor
and its process groups; the flight-recorder records (``profiles/c10d/``) as they are. The replay
(suite/postmortem/replay/load.py) reads nothing else of them; the profiles shrink from megabytes to kilobytes.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

OP_PREFIXES = ("gloo:", "nccl:", "mpi:")


def trim(run: Path, out: Path) -> None:
    timeline = json.loads((run / "trace.json").read_text())
    timeline["traceEvents"] = [
        e
        for e in timeline.get("traceEvents", [])
        if e.get("ph") == "X"
        and (e.get("cat") in ("case", "sample") or (e.get("cat"), e.get("name")) == ("op", "barrier"))
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "trace.json").write_text(json.dumps({k: timeline[k] for k in ("traceEvents", "otherData") if k in timeline}))
    (out / "profiles").mkdir(exist_ok=True)
    for p in sorted((run / "profiles").glob("*.rank*.json")):
        doc = json.loads(p.read_text())
        keep = {k: doc[k] for k in ("baseTimeNanoseconds", "distributedInfo") if k in doc}
        keep["traceEvents"] = [
            {k: e[k] for k in ("ph", "name", "ts", "dur", "pid", "tid") if k in e}
            for e in doc.get("traceEvents", [])
            if e.get("ph") == "X" and str(e.get("name", "")).startswith(OP_PREFIXES)
        ]
        (out / "profiles" / p.name).write_text(json.dumps(keep, separators=(",", ":")))
    if (run / "profiles" / "c10d").is_dir():
        shutil.copytree(run / "profiles" / "c10d", out / "profiles" / "c10d", dirs_exist_ok=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or not (Path(sys.argv[1]) / "trace.json").is_file():
        print("usage: python scripts/trim_profiled_run.py RUN OUT (RUN: a profiled run folder)", file=sys.stderr)
        sys.exit(2)
    trim(Path(sys.argv[1]), Path(sys.argv[2]))
