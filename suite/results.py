"""The result record and atomic JSON writing.

A record is the ``extra_info`` of one pytest-benchmark entry. ``make_record``
fills the fields every experiment shares (schema below); experiments add their
own keys (``peer``, ``root``, ...). ``write_json_atomic`` is the only way the
suite writes a results file: temp file in the same directory, fsync, rename,
so a reader sees either the previous complete file or the new one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from suite import metrics
from suite.timing import Measurement

REQUIRED_FIELDS = (
    "experiment", "op", "backend", "device", "dtype", "world_size", "size_bytes", "count",
    "in_place", "timing_mode", "iterations", "time_us", "p05_us", "p50_us", "p95_us", "p99_us",
    "algbw_gbps", "busbw_gbps", "n_wrong",
)


def make_record(*, experiment: str, op: str, backend: str, device: str, dtype: str, world_size: int,
                size_bytes: int, count: int, in_place: bool, m: Measurement, n_wrong: int,
                bw_op: str | None = None, **extra) -> dict:
    """Build the shared record. ``bw_op`` selects the busbw factor (defaults to ``op``)."""
    stats = metrics.latency_stats_us(m.samples_s)
    t = m.median_s
    if size_bytes > 0 and t > 0:
        algbw = metrics.algbw_gbps(size_bytes, t)
        busbw = algbw * metrics.busbw_factor(bw_op or op, world_size)
    else:
        algbw = busbw = 0.0
    rec = {
        "experiment": experiment, "op": op, "backend": backend, "device": device, "dtype": dtype,
        "world_size": world_size, "size_bytes": int(size_bytes), "count": int(count),
        "in_place": bool(in_place), "timing_mode": m.timing_mode, "timer": m.timer, "iterations": m.iterations,
        "ops_per_sample": m.ops_per_sample, "warmup_iters": m.warmup_iters,
        "time_us": t * 1e6, **stats, "algbw_gbps": algbw, "busbw_gbps": busbw,
        "busbw_factor": metrics.busbw_factor(bw_op or op, world_size) if (bw_op or op) in metrics.OPS_WITH_FACTOR else None,
        "n_wrong": int(n_wrong),
        "samples_us": [s * 1e6 for s in m.samples_s],
    }
    if m.precision_reached is not None:
        rec["precision_reached"] = m.precision_reached
    rec.update(extra)
    return rec


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (same-dir temp, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp creates 0600; a results file is as readable as any other
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=1, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def load_run(path: str | os.PathLike) -> dict:
    """Load a run: a results directory (its bench.json) or a JSON file."""
    p = Path(path)
    if p.is_dir():
        p = p / "bench.json"
    with open(p) as fh:
        return json.load(fh)


def records(run: dict) -> list[dict]:
    """The extra_info records of a loaded run, in run order."""
    return [b["extra_info"] for b in run.get("benchmarks", []) if b.get("extra_info")]
