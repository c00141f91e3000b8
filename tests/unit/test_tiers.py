"""The test tiers are folders, and `make test` (pytest tests) collects every one of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIERS = ("unit", "dist", "e2e", "docker", "gpu")


def test_every_test_file_is_in_a_tier_and_collected():
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))
    assert files and all(f.split("/")[1] in TIERS for f in files), files
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "--collect-only", "-q", "-m", ""],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    collected = {line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line}
    assert collected == set(files), sorted(set(files) - collected)
