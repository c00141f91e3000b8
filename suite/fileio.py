"""Results files: the one way the suite writes JSON (atomic), and reads it back.

``write_json_atomic`` writes a temp file in the same directory, fsyncs it and renames
it over the target, so a reader sees either the previous complete file or the new
one. It imports nothing of the suite, so any module (failure reporting, the launcher,
the records) can use it without an import circle.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


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
