"""`make help` is generated from the Makefiles: every target a user can type has its one-line purpose
next to its rule (``target: deps  ## purpose``), so the list cannot drift from the targets."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT

RULE = re.compile(r"^([a-zA-Z0-9][a-zA-Z0-9_-]*):(?!=)(.*)$")


def _targets() -> dict[str, str]:
    out = {}
    for path in [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]:
        for line in path.read_text().splitlines():
            m = RULE.match(line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def test_every_target_has_a_purpose():
    missing = [t for t, rest in _targets().items() if "  ## " not in rest]
    assert not missing, f"targets without '  ## <purpose>' on their rule line: {missing}"


def test_make_help_lists_every_target_once():
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout
    listed = re.findall(r"^  make (\S+)", out, re.M)
    assert sorted(listed) == sorted(_targets())
