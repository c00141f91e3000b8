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
import os
import re
import resource
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
    with profile(activities=activities, record_shapes=False, with_stack=False) as prof:
        yield prof
    prof.export_chrome_trace(str(path))


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
