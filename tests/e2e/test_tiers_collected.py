"""`make test` (pytest tests) collects every test file of every tier (tests/unit/test_tiers.py
checks the configuration without running pytest)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.tiers import ROOT, tier_files


@pytest.mark.slow
def test_every_test_file_is_collected():
    files = tier_files()
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
