"""Results files: the one way the suite writes JSON (atomic), and reads it back.

``write_json_atomic`` writes a temp file in the same directory, fsyncs it and renames
it over the target, so a reader sees either the previous complete file or the new
one. It imports nothing of the suite, so any module (failure reporting, the launcher,
the records) can use it without an import circle. A write that fails (disk full, file-size
limit, permissions) raises ``ResultsWriteError`` naming the file, and leaves the previous
file as it was.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


class ResultsWriteError(OSError):
    """A results file could not be written: ``str()`` is one line naming the file and the cause,
    e.g. ``cannot write results/x/bench.json: No space left on device``."""

    failure_kind = "io_error"  # a rank's failure note (suite/failures.py) says so; the launcher maps it

    def __str__(self) -> str:
        return str(self.strerror)


def write_error(path: str | os.PathLike, e: OSError) -> ResultsWriteError:
    """``e`` (from writing ``path``) as one line naming the file and the cause."""
    return ResultsWriteError(e.errno, f"cannot write {path}: {e.strerror or e}")


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (same-dir temp, fsync, rename).
    ResultsWriteError (an OSError) names the file when the write fails; ``path`` is then unchanged."""
    path = Path(path)
    try:
        _write_json_atomic(path, obj)
    except ResultsWriteError:
        raise
    except OSError as e:
        raise write_error(path, e) from None


def _write_json_atomic(path: Path, obj) -> None:
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
