"""The README and ``make help`` say the same of what a newcomer runs first: the unit tier's test count and time
(both quoting docs/tests.md's table, the one place they are measured) and the exit statuses (from
suite/common/failures.py). The count must be within 10% of the tests the unit tier collects: counted from this
session's own collection where it collected the whole tier (``make test-fast``, the unit tier of ``make test``),
else by ``pytest --collect-only`` (tens of seconds: only when this file runs alone). The README's end-of-run
excerpt names its command, the first run at the default world, and reads as a run ends now."""

from __future__ import annotations

import re
import subprocess
import sys

from suite.common import failures
from tests.conftest import ROOT
from tests.unit.conftest import COLLECTED

FIGURES = re.compile(r"about ([\d,]+) tests.{0,120}?(\d+ s) on an idle 2-core machine", re.S)
"""The unit tier's count and time, as the README, make help and docs/tests.md state them."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _make_help() -> str:
    return subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout


def _unit_tests_collected() -> int:
    files = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests" / "unit").glob("test_*.py")}
    if files <= {nodeid.split("::")[0] for nodeid in COLLECTED}:
        return sum(nodeid.startswith("tests/unit/") for nodeid in COLLECTED)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/unit", "--collect-only", "-q", "-p", "no:randomly"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return int(re.search(r"^(\d+) tests? collected", out, re.M).group(1))


def test_the_readme_and_make_help_state_the_unit_tiers_figures_of_docs_tests():
    readme = _one_line((ROOT / "README.md").read_text())
    quick = readme[readme.index("**`make test-fast`**") :]
    help_line = next(ln for ln in _make_help().splitlines() if ln.startswith("  make test-fast "))
    tests_md = (ROOT / "docs" / "tests.md").read_text()
    row = next(ln for ln in tests_md.splitlines() if ln.startswith("| `unit/` |"))
    measured = re.match(r"\| `unit/` \| [^|]+ \| (\d+ s) \| about ([\d,]+) tests", row)
    assert measured, row
    count, time = measured.group(2), measured.group(1)
    for where, text in (("README", quick), ("make help", help_line)):
        said = FIGURES.search(text)
        assert said and said.groups() == (count, time), f"{where} says {said and said.groups()}, docs/tests.md {row}"
    assert "docs/tests.md" in quick[:400]  # the README links the source
    collected = _unit_tests_collected()
    stated = int(count.replace(",", ""))
    assert abs(stated - collected) <= 0.1 * collected, f"docs say about {stated} unit tests; {collected} collected"


def test_the_readme_and_make_help_name_the_same_exit_statuses():
    launcher = sorted(s for s in failures.MEANING if 0 < s < 128)
    assert launcher == list(range(launcher[0], launcher[-1] + 1))  # a range, as both say
    phrase = (
        f"launcher {launcher[0]}-{launcher[-1]}, {failures.EXIT_SIGINT} on Ctrl-C, {failures.EXIT_SIGTERM} on SIGTERM; "
        f"compare 1 or 3; doctor {failures.EXIT_FINDING}"
    )
    assert phrase in _one_line(_make_help()), _make_help()
    assert phrase in _one_line((ROOT / "README.md").read_text())


def test_the_readmes_end_of_run_is_of_the_default_world_and_reads_as_a_run_ends_now():
    # the excerpt names the command that printed it: the README's own first run, at the default world (one rank
    # per core), whose headline quotes the canonical op against the window probe's rate, as the run's end does
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"^The end of `(make bench-cpu[^`]*)` \(([^)]*)\):\n\n```\n(.*?)```", readme, re.S | re.M)
    assert m, "no end-of-run excerpt, or it names no command"
    command, said, block = m.groups()
    assert "NPROC" not in command and "default world" in said, (command, said)
    lines = block.splitlines()
    assert lines[0].startswith("# verdict: PASS: ") and len(lines) <= 10, lines
    (coll,) = [ln for ln in lines if ln.startswith("# collectives: ")]
    assert coll.startswith("# collectives: all_reduce (sum, float32) reaches ") and "p2p window 0->1" in coll, coll
