"""Profiler traces and peak memory, for any experiment.

Traces: ``SUITE_PROFILE=1`` (``make bench-cpu PROFILE=1``) records a torch.profiler
trace of every case on every rank and saves it as Chrome/Perfetto JSON next to the
run's results: ``<results-dir>/profiles/<case>.rank<r>.json`` (open in
https://ui.perfetto.dev or chrome://tracing). ``SUITE_PROFILE=<text>`` profiles only the
cases whose test id contains ``<text>`` (traces of long runs are large: tens of MB per
rank per case). The trace covers the whole case (correctness check, warm-up and the
timed steps); communication shows as ``gloo:``/``nccl:`` record functions, DDP's
buckets as ``DistributedDataParallel.forward`` / autograd hooks, so the overlap of
all_reduce with backward can be read off the timeline.

Process groups: the profiler's ``gloo:`` ops carry no process group nor c10d sequence number (torch 2.13 on
Gloo records no ``record_param_comms`` metadata), so a profiled run also switches on torch's flight recorder
(suite/common/flight_recorder.py ``profile_env``, set by the launcher) and writes, beside each trace, the
collectives the recorder saw issued while the case ran: ``<results-dir>/profiles/c10d/<case>.rank<r>.json`` (each
op's group, sequence number and name, and when it was issued, ``c10d_ops``; each group's ranks), which the what-if
replay (suite/postmortem/replay) keys ops on. Gloo's recorder keeps no send or recv (torch 2.13), so the same file
holds the ones the case issued, each with its group, sequence number, sender and receiver (``sends``:
suite/harness/c10d.py ``p2p_calls``).

The autouse fixture ``suite_profile`` in ``suite.harness.pytest.plugin`` (the pytest bridge) uses it, so
every experiment gets it without code of its own; this module does not import pytest.
``profile_to(path)`` is the same as a context manager for scripts.

Peak memory: ``PeakMemory`` measures the high-water mark of one region. On CUDA it is
``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``. On CPU torch has
no allocator statistics, so it is the process's peak resident set size (VmHWM), which
Linux lets a process reset by writing ``5`` to ``/proc/self/clear_refs`` (proc(5));
where that is not possible it falls back to ``getrusage`` ``ru_maxrss``, the peak since
the process started, and says so in ``kind``.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from suite.common.switches import switch
from suite.system import memory


def wanted(nodeid: str, env=None) -> bool:
    """Whether ``SUITE_PROFILE`` in ``env`` (default os.environ; suite/common/switches.py SWITCHES) asks for a trace
    of the case ``nodeid``."""
    setting = switch("SUITE_PROFILE", env)
    return setting if isinstance(setting, bool) else setting in nodeid


def trace_path(results_dir: str | os.PathLike, nodeid: str, rank: int) -> Path:
    """``<results_dir>/profiles/<sanitised test name>.rank<r>.json``."""
    name = nodeid.split("::", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("_")[:150] or "case"
    return Path(results_dir) / "profiles" / f"{name}.rank{rank}.json"


@contextlib.contextmanager
def profile_to(path: str | os.PathLike):
    """Profile the block (CPU, and CUDA when available) and write a Chrome trace to ``path``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    from suite.harness import c10d

    since = time.time_ns()
    with c10d.p2p_calls() as sends, profile(activities=activities, record_shapes=False, with_stack=False) as prof:
        yield prof
    until = time.time_ns()
    prof.export_chrome_trace(str(path))
    ops = c10d_ops(since, until)
    if ops or sends:
        c10d_path(path).parent.mkdir(parents=True, exist_ok=True)
        doc = {"ops": ops, "sends": sends, "groups": c10d.group_ranks()}
        c10d_path(path).write_text(json.dumps(doc, separators=(",", ":")))


def c10d_path(trace: Path) -> Path:
    """Where the collectives of the case whose trace is ``trace`` go: ``profiles/c10d/<trace's name>``."""
    return trace.parent / "c10d" / trace.name


def c10d_ops(since_ns: int, until_ns: int) -> list[dict]:
    """The collectives the flight recorder saw issued between the two times (Unix ns), in issue order: each one's
    process group (``pg``: its name, as torch names it), c10d sequence number
    in that group (``seq``), op (``op``: "all_reduce"), issue time (``issued_ns``) and the group's count of every op
    it issued, p2p included (``op_id``: the sequence numbers ``c10d.p2p_calls`` gives sends and recvs); [] where
    the recorder is off or this torch has no dump. Point-to-point ops are left out: Gloo's recorder keeps none
    (torch 2.13), and ``profile_to`` records them itself (``c10d.p2p_calls``)."""
    from suite.harness import c10d

    try:
        raw = c10d.flight_recorder_dump()
        entries = pickle.loads(raw).get("entries") or [] if raw else []
    except Exception:  # noqa: BLE001 - a private API: no dump is no grouping, never a failed case
        return []
    out = []
    for e in sorted(entries, key=lambda e: e.get("record_id", 0)):
        issued = int(e.get("time_created_ns") or 0)
        if e.get("is_p2p") or not e.get("collective_seq_id") or not since_ns <= issued <= until_ns:
            continue
        pg = (e.get("process_group") or ["?"])[0]
        op = str(e.get("profiling_name", "?")).rpartition(":")[2]
        seq = int(e["collective_seq_id"])
        out.append({"pg": str(pg), "seq": seq, "op": op, "issued_ns": issued, "op_id": int(e.get("op_id") or 0)})
    return out


# --- peak memory ----------------------------------------------------------------------------------


@dataclass
class PeakMemory:
    """High-water mark of one region: ``with PeakMemory(device) as pm: ...; pm.peak_bytes``."""

    device: torch.device
    peak_bytes: int = 0
    kind: str = ""
    """What was measured: cuda_max_memory_allocated, cpu_peak_rss (reset per region) or
    cpu_peak_rss_since_start (no reset possible)."""

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.kind = "cuda_max_memory_allocated"
        else:
            self.kind = "cpu_peak_rss" if memory.reset_vmhwm() else "cpu_peak_rss_since_start"
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = int(torch.cuda.max_memory_allocated(self.device))
        elif self.kind == "cpu_peak_rss":
            self.peak_bytes = memory.vmhwm_bytes() or 0
        else:
            self.peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
