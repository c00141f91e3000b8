"""The journal's dumps: ``<run>/hang/rank<r>.json`` (journal tail, live sequence numbers, every thread's
stack) when the launcher asks or the rank fails, torch's flight-recorder dump beside it, and faulthandler's
stacks in ``<run>/hang/rank<r>.fatal`` on a fatal signal."""

from __future__ import annotations

import faulthandler
import math
import os
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path

from suite.harness import c10d
from suite.common import journal_ring
from suite.harness.c10d import sequence_number
from suite.common import flight_recorder
from suite.common.fileio import write_json_atomic

POLL_S = 0.25
"""How often a rank's journal thread looks for the launcher's dump request."""


def dump(journal, reason: str, *, failed: bool = False) -> None:
    """Write ``<run>/hang/rank<r>.json``: journal tail, live counts, every thread's stack (best effort).

    The dump a rank leaves when it fails is kept: a later request would show it tearing down."""
    if not journal.run_dir or (journal.failed and not failed):
        return
    journal.failed = journal.failed or failed
    if flight_recorder_on():  # first: the launcher reads the dumps as soon as every journal is there
        dump_flight_recorder(flight_recorder.path(journal.run_dir, journal.rank))
    try:
        write_json_atomic(Path(journal.run_dir) / "hang" / f"rank{journal.rank}.json", snapshot(journal, reason))
    except Exception:  # a dump must never raise in a failing rank
        pass
    journal.timeline.write_part(reason)  # after the dump the launcher waits for (suite/harness/journal/timeline.py)


def snapshot(journal, reason: str) -> dict:
    main = threading.main_thread().ident
    names = {t.ident: t.name for t in threading.enumerate()}
    threads = [
        {
            "name": names.get(tid, str(tid)),
            "main": tid == main,
            "frames": [[f.filename, f.lineno, f.name] for f in traceback.extract_stack(frame)],
        }
        for tid, frame in sys._current_frames().items()
    ]
    if journal.exc is not None and journal.exc.__traceback__ is not None:  # where the main thread failed
        tb = traceback.extract_tb(journal.exc.__traceback__)
        threads.insert(0, {"name": "failed", "main": True, "frames": [[f.filename, f.lineno, f.name] for f in tb]})
    return {
        "rank": journal.rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "reason": reason,
        "time_unix": time.time(),
        "unix_minus_clock": journal.unix_minus_clock,
        "case": journal.case,
        "seq": {name: sequence_number(g) for name, g in journal.groups.items()},
        "journaled": dict(journal.count),
        "case_ops": case_ops(journal),
        "tail": [entry_json(e, journal.unix_minus_clock) for e in journal.issued(list(journal.entries))],
        "threads": threads,
    }


def case_ops(journal) -> dict:
    """The case's ops by name, as issued: less those a timed block recorded ahead of the sample begun."""
    ops, planned = dict(journal.case_ops), journal.planned
    if planned is not None:
        begun = {id(e) for e in planned.pending[: planned.i * planned.width]}
        for e in list(journal.entries):
            if e[7] == "ahead" and id(e) not in begun and e[6] == journal.case:
                ops[e[0]] = ops.get(e[0], 0) - 1
    return ops


def watch(journal) -> None:
    """Start the thread that answers the launcher's dump request (``<run>/hang/request``)."""
    if not journal.run_dir:
        return
    request = Path(journal.run_dir) / "hang" / "request"

    def run():
        while True:
            time.sleep(POLL_S)
            try:
                stamp = request.read_text()
            except OSError:
                continue
            if stamp != journal.dumped_request:
                journal.dumped_request = stamp
                dump(journal, f"requested by the launcher: {stamp.strip()}")

    threading.Thread(target=run, name="suite-journal", daemon=True).start()


def arm(journal) -> None:
    """Leave faulthandler's stacks in ``<run>/hang/rank<r>.fatal`` on a fatal signal and the journal's entries
    in ``rank<r>.ring`` (suite/common/journal_ring.py), make the folder NCCL's own dump lands in, and watch
    for dump requests (nothing but the watch without a run folder)."""
    run_dir, rank = journal.run_dir, journal.rank
    if run_dir:
        try:
            path = Path(run_dir) / "hang" / f"rank{rank}.fatal"
            path.parent.mkdir(parents=True, exist_ok=True)
            journal.fatal_file = open(path, "w")  # noqa: SIM115 - open for the process's lifetime (faulthandler writes on a signal)
            faulthandler.enable(file=journal.fatal_file, all_threads=True)
            # torchrun ends the other ranks with SIGTERM when one dies: their stacks show what they waited in
            faulthandler.register(signal.SIGTERM, file=journal.fatal_file, all_threads=True, chain=True)
            ring = journal_ring.Ring(path.with_suffix(".ring"), socket.gethostname(), journal.unix_minus_clock)
            ring.case(journal.case)
            journal.ring = ring  # a rank a fatal signal ends leaves what it issued (the launcher reads it)
        except OSError:
            pass
    folder = nccl_dump_folder()
    if run_dir and folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    watch(journal)


def nccl_dump_folder(env=os.environ) -> Path | None:
    """The folder NCCL's own flight-recorder dump on a timeout lands in (``<run>/failures/`` as the launcher sets
    it for NCCL runs, suite/common/flight_recorder.py ``flight_recorder_env``), None where no dump file is set: a
    profiled run's recorder (``profile_env``) sets only the buffer, and leaves no folder behind."""
    target = env.get("TORCH_FR_DUMP_TEMP_FILE") or env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    return Path(target).parent if target and flight_recorder_on(env) else None


def flight_recorder_on(env=os.environ) -> bool:
    """Whether torch's flight recorder records this process's collectives (a buffer size > 0, under the
    name of torch >= 2.9 or the older one; suite/launch/cli.py sets it for NCCL runs)."""
    size = env.get("TORCH_FR_BUFFER_SIZE") or env.get("TORCH_NCCL_TRACE_BUFFER_SIZE") or "0"
    return size.strip().isdigit() and int(size) > 0


def dump_flight_recorder(path: Path) -> bool:
    """Write this process's flight-recorder dump (torch's pickle, what NCCL writes on a timeout) to ``path``
    through a temp name; False where torch has no dump call (private API) or it fails. Without the entries'
    stack traces: symbolising them took 6.5 s for 60 entries here (torch 2.13, Gloo), longer than the
    launcher waits; the journal's own stacks say where the rank is."""
    try:
        raw = c10d.flight_recorder_dump()
        if raw is None:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp")
        tmp.write_bytes(raw)
        tmp.replace(path)
        return True
    except Exception:  # a dump must never raise in a failing rank
        return False


def entry_json(e: list, unix_minus_clock: float) -> dict:
    """A journal entry (suite/harness/journal/__init__.py ``enter``) as JSON: its shape a list, its dtype a name, the
    bytes of its first tensor, when its call began (``time_unix``; ``clock`` on this process's perf_counter)
    and returned (``end_clock``; None while it runs)."""
    op, group, seq, shape, dtype, peer, case, state, clock, end_clock = e
    return {
        "op": op,
        "group": group,
        "seq": seq,
        "shape": None if shape is None else list(shape),
        "dtype": None if dtype is None else str(dtype).removeprefix("torch."),
        "peer": peer,
        "case": case,
        "state": state,
        "time_unix": clock + unix_minus_clock,
        "clock": clock,
        "end_clock": end_clock,
        "bytes": None if shape is None or dtype is None else math.prod(shape) * dtype.itemsize,
    }
