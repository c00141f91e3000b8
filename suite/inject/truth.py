"""The truth of a run's injection: ``<run>/truth/injections-<host>.json``, one file per host whose launcher had a
plan, written before the ranks start and again by the controller when it applies and reverts the injection.

Nothing that judges a run reads it while the run goes on: the online watch and the doctor see only what the
ranks measured; ``read`` is for scoring a finished run (tests/unit/test_inject.py checks that no module under
suite/ or experiments/ but suite/inject/ and the scorer names the folder). The folder and its files are the
owner's only (modes 700 and 600).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from suite.common.fileio import write_json_atomic

FOLDER = "truth"


def path(run_dir: Path, host: str | None = None) -> Path:
    return Path(run_dir) / FOLDER / f"injections-{host or socket.gethostname()}.json"


def write(run_dir: Path, record: dict, host: str | None = None) -> Path:
    """This host's record (``host``: under that name), atomically, readable by its owner only."""
    p = path(run_dir, host)
    p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_json_atomic(p, record)
    os.chmod(p, 0o600)
    return p


def read(run_dir: Path) -> list[dict]:
    """Every host's record of a finished run (none: a run without an injection), for scoring it."""
    out = []
    for p in sorted((Path(run_dir) / FOLDER).glob("injections-*.json")):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    return out
