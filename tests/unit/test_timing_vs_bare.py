"""The bare reference loop is independent of the suite, and the comparison refuses bad arguments up front.

(The comparison itself is a benchmark, ``make timing-vs-bare``: its ratio belongs in docs/metrics.md, not in a
timed assertion here.)"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize("script", ["bare_loop.py", "bare_inside.py"])
def test_the_bare_loop_imports_nothing_from_the_suite(script):
    """Neither the loop nor the plugin that runs it inside the suite's ranks."""
    tree = ast.parse((ROOT / "scripts" / script).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names and not {n for n in names if n.split(".")[0] in ("suite", "experiments", "tests")}


def test_the_comparison_rejects_bad_arguments_before_starting_a_rank():
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "timing_vs_bare.py"), "--sizes", "1000,6"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.startswith("error: ") and len(r.stderr.splitlines()) == 1
