"""torch's flight recorder, read by the hang diagnosis (suite/postmortem/hang.py): the dumps the ranks leave in
``<run>/failures/`` (NCCL's own on a timeout; every rank's when the launcher asks, on any backend), turned into
the journal's form so that ``hang.diagnose`` reads them as it reads the suite's own journals."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

from suite.common.switches import switch


FR_PREFIX = "nccl_trace_rank_"
"""The flight-recorder dumps' names in ``<run>/failures/`` (flight_recorder_env below: NCCL's own
dump on a timeout; suite/harness/journal/__init__.py: every rank's dump when the launcher asks, on any backend)."""


def path(run_dir, rank: int) -> Path:
    """Where rank ``rank``'s dump is written: ``<run>/failures/nccl_trace_rank_<rank>``."""
    return Path(run_dir) / "failures" / f"{FR_PREFIX}{rank}"


def as_journal(dump: dict, rank: int) -> dict:
    """One rank's flight-recorder dump (torch's pickled dict of ``entries``, version 2.10 on torch 2.13) in
    the journal's form, so ``diagnose`` reads it: collectives only (their ``collective_seq_id`` is per
    process group; p2p has its own counter), the op from ``profiling_name`` ("nccl:all_reduce",
    "gloo:all_reduce"), the first input's size, completed when its ``state`` says so (NCCL's watchdog) or
    when ``pg_status`` counts it completed (``last_completed_collective`` of its group: Gloo leaves every
    entry "scheduled"), and the last entry's Python frames (innermost first in the dump). A group's last
    entry is completed only by its own ``state``: ``pg_status`` counts an op that failed (a Gloo timeout
    while its peer never came) as completed, and a rank still held in its last op must read as waiting."""
    entries = sorted(
        (e for e in dump.get("entries") or [] if not e.get("is_p2p") and e.get("collective_seq_id")),
        key=lambda e: e.get("record_id", 0),
    )
    tail, seq, ops = [], {}, {}
    status = dump.get("pg_status") or {}
    last = {str((e.get("process_group") or ["0"])[0]): e.get("record_id") for e in entries}
    for e in entries:
        group = str((e.get("process_group") or ["0"])[0])
        done = int((status.get(group) or {}).get("last_completed_collective", -1))
        op = str(e.get("profiling_name", "?")).rpartition(":")[2]
        sizes, dtypes = e.get("input_sizes") or [], e.get("input_dtypes") or []
        n = int(e["collective_seq_id"])
        tail.append(
            {
                "op": op,
                "group": group,
                "seq": n,
                "shape": list(sizes[0]) if sizes else None,
                "dtype": dtypes[0] if dtypes else None,
                "peer": None,
                "case": "",
                "state": "completed"
                if e.get("state") == "completed" or (n <= done and e.get("record_id") != last[group])
                else "entered",
                "time_unix": (e.get("time_created_ns") or 0) / 1e9,
            }
        )
        seq[group] = max(seq.get(group, 0), n)
        ops[op] = ops.get(op, 0) + 1
    frames = (
        [[f.get("filename", "?"), f.get("line", 0), f.get("name", "?")] for f in (entries[-1].get("frames") or [])][
            ::-1
        ]
        if entries
        else []
    )
    return {
        "rank": rank,
        "host": dump.get("hostname", "?"),
        "time_unix": max((t["time_unix"] for t in tail), default=0.0),
        "case": "",
        "seq": seq,
        "tail": tail,
        "case_ops": ops,
        "threads": [{"name": "flight recorder: last collective", "main": True, "frames": frames}],
    }


def read(run_dir: Path) -> dict[int, dict]:
    """The NCCL flight-recorder dumps the ranks left in ``run_dir`` (only this suite's own ranks write
    them there), each in the journal's form."""
    out = {}
    for p in sorted((run_dir / "failures").glob(f"{FR_PREFIX}*")):
        rank = p.name[len(FR_PREFIX) :]
        if not rank.isdigit():
            continue
        try:
            raw = p.read_bytes()
            try:
                dump = json.loads(raw)
            except ValueError:
                dump = pickle.loads(raw)  # noqa: S301 - written by this run's own ranks (torch's format)
            out[int(rank)] = as_journal(dump, int(rank))
        except Exception:  # noqa: BLE001 - a truncated or foreign dump is skipped, not fatal
            continue
    return out


def flight_recorder_env(env: dict, run_dir: Path, torch_version: str) -> dict[str, str]:
    """NCCL flight-recorder settings for the ranks, unless the user set their own.

    The flight recorder keeps the last collectives of each rank in a ring buffer;
    with dump-on-timeout a hung or failed NCCL run leaves one trace per rank
    (``<run_dir>/failures/nccl_trace_rank_<rank>``, read by the hang diagnosis, suite/postmortem/hang.py).
    torch 2.9 renamed TORCH_NCCL_TRACE_BUFFER_SIZE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE to
    TORCH_FR_BUFFER_SIZE / TORCH_FR_DUMP_TEMP_FILE (the old names still work, with a
    deprecation warning; torchtitan switches on the same version). Dumps need
    TORCH_NCCL_ASYNC_ERROR_HANDLING=3, its default (pytorch/pytorch#121055).
    """
    major_minor = tuple(int(x) for x in re.findall(r"\d+", torch_version)[:2])
    new_names = major_minor >= (2, 9)
    out: dict[str, str] = {}
    for new, old, value in (
        ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"),
        (
            "TORCH_FR_DUMP_TEMP_FILE",
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
            str(run_dir.resolve() / "failures" / "nccl_trace_rank_"),
        ),
    ):
        if new not in env and old not in env:
            out[new if new_names else old] = value
    if "TORCH_NCCL_DUMP_ON_TIMEOUT" not in env:
        out["TORCH_NCCL_DUMP_ON_TIMEOUT"] = "1"
    return out


FR_BUFFER = "20000"
"""The flight recorder's ring of a profiled run: the collectives of the longest profiled case (a case that issues
more keeps only its last ones, and the replay then matches its ops on their names)."""


def profile_env(env: dict, torch_version: str) -> dict[str, str]:
    """The launcher's settings for a profiled run (``SUITE_PROFILE`` set in ``env``): torch's flight recorder on,
    unless the user set its buffer (the NCCL runs' own, flight_recorder_env, or theirs); the traces' collectives:
    suite/harness/profiling.py ``c10d_ops``."""
    if not switch("SUITE_PROFILE", env) or "TORCH_FR_BUFFER_SIZE" in env or "TORCH_NCCL_TRACE_BUFFER_SIZE" in env:
        return {}
    new_names = tuple(int(x) for x in re.findall(r"\d+", torch_version)[:2]) >= (2, 9)
    return {"TORCH_FR_BUFFER_SIZE" if new_names else "TORCH_NCCL_TRACE_BUFFER_SIZE": FR_BUFFER}
