"""``make predict`` run by a test with this interpreter's environment as the venv."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from tests.conftest import ROOT


VENV = Path(sys.executable).parent.parent


MAKE = ["make", "-o", f"{VENV}/.installed", f"VENV={VENV}"]
"""`make` with this interpreter's environment as the venv (never rebuilt by the test)."""


def make_predict(*args, cwd=ROOT):
    return subprocess.run([*MAKE, "-s", "predict", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
