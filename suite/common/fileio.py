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

    failure_kind = "io_error"  # a rank's failure note (suite/common/failures.py) says so; the launcher maps it

    def __str__(self) -> str:
        return str(self.strerror)


def write_error(path: str | os.PathLike, e: OSError) -> ResultsWriteError:
    """``e`` (from writing ``path``) as one line naming the file and the cause."""
    return ResultsWriteError(e.errno, f"cannot write {path}: {e.strerror or e}")


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (same-dir temp, fsync, rename).
    ResultsWriteError (an OSError) names the file when the write fails; ``path`` is then unchanged."""
    try:
        text = json.dumps(obj, indent=1, default=str)  # (a value's str() may do I/O)
    except OSError as e:
        raise write_error(path, e) from None
    write_text_atomic(path, text)


def dumps_with_list(obj: dict, key: str, encoded: list[str]) -> str:
    """``json.dumps(obj, indent=1, default=str)`` with ``obj[key]`` the list of the items ``encoded`` holds
    (each ``json.dumps(item, indent=1, default=str)``), without encoding them again: a file rewritten after
    every case then costs the new entries' encoding, not the whole run's (Python's json encodes an indented
    document in pure Python)."""
    marker = "\x00suite: encoded list\x00"  # no value of a results file holds a NUL
    head = json.dumps({**obj, key: marker}, indent=1, default=str)
    tag = json.dumps(marker)
    if head.count(tag) != 1:
        raise ValueError("cannot place the encoded list")
    if not encoded:
        return head.replace(tag, "[]")
    items = ",\n".join("  " + e.replace("\n", "\n  ") for e in encoded)  # two levels deep (indent 1)
    return head.replace(tag, "[\n" + items + "\n ]")


def write_text_atomic(path: str | os.PathLike, text: str, *, durable: bool = True) -> None:
    """Write ``text`` to ``path`` atomically (same-dir temp, fsync, rename). ``durable=False`` skips the
    fsyncs: a reader still sees the old or the new file whole, and a crashed process leaves one of them,
    but a power loss may leave neither (for a file rewritten after every case and once more, durably, at
    the end; two fsyncs per case were most of its cost). ResultsWriteError names the file when the write
    fails; ``path`` is then unchanged."""
    path = Path(path)
    try:
        _write_text_atomic(path, text, durable)
    except ResultsWriteError:
        raise
    except OSError as e:
        raise write_error(path, e) from None


def _write_text_atomic(path: Path, text: str, durable: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp creates 0600; a results file is as readable as any other
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if not durable:
        return
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
