"""``scripts/soak.py`` (``make soak``): a round that fails says why, so a flake's cause is not lost with its round."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

FLAKY = """
import os

def test_passes():
    pass

def test_fails_on_its_second_round():
    seen = os.path.exists("{mark}")
    open("{mark}", "w").close()
    assert not seen, "the planted flake saw {{}}".format("its mark")
"""


def test_a_failed_round_prints_its_failure_and_the_summary_counts_it(tmp_path):
    test = tmp_path / "test_flaky.py"
    test.write_text(FLAKY.format(mark=tmp_path / "mark"))
    cmd = [sys.executable, str(ROOT / "scripts" / "soak.py"), "2", str(test), "--", "-p", "no:cacheprovider"]
    # run from the planted test's folder: pytest's rootdir, which names the test in the JUnit file, falls back to the
    # common ancestor of the folder it runs in and the test's (a checkout under /tmp made it /tmp, and the names
    # pytest-of-root.pytest-N...test_flaky)
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("round 1/2: 2 tests, 0 failed")
    assert lines[1].startswith("round 2/2: 2 tests, 1 failed") and lines[1].endswith("test_fails_on_its_second_round")
    assert "--- test_flaky::test_fails_on_its_second_round, round 2:" in p.stdout
    assert "the planted flake saw its mark" in p.stdout  # the assertion's own words, from the round that failed
    assert "  1/2 failed: test_flaky::test_fails_on_its_second_round" in p.stdout
