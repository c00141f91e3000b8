"""Every suite switch is declared once (suite/common/switches.py SWITCHES) with its validator: unset means its
default, a good value is read as documented, a bad one is one line naming the switch and exit 2 before
any rank starts; every read goes through the table; docs/switches.md and `make help` list the table."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from suite.launch import cli as launch
from suite.common.config import ConfigError
from suite.common.knobs import ENV_KNOBS
from suite.common.switches import SWITCHES, check_switches, switch

BAD_VALUES = """
SUITE_PROGRESS          | live             | choose auto
SUITE_PROGRESS_S        | -1               | a number >= 0
SUITE_PROFILE           | all reduce       | no spaces
SUITE_REPORT            | maybe            | choose 1 (on) or 0 (off)
SUITE_ALL_RANKS_OUTPUT  | 2                | choose 1 (on) or 0 (off)
SUITE_KEEP_RANK_SAMPLES | yes please       | choose 1 (on) or 0 (off)
SUITE_GIT_COMMIT        | abc def          | no spaces
SUITE_INJECT_CORRUPTION | flop:all_reduce  | unknown fault 'flop'
SUITE_INJECT_DELAY      | 2:0.1            | rank 2 is not a rank of this run (0..1)
SUITE_INJECT_MISMATCH   | all_reduce@timed | unknown phase @timed
SUITE_INJECT_DIVERGE    | skip:1:0         | k must be >= 1
SUITE_INJECT_FAULT      | kill:0           | 2 field(s), not 3
SUITE_INJECT_BACKEND    | dropped:p2p      | unknown fault 'dropped'
"""
BAD = {
    name: (value, says) for name, value, says in (map(str.strip, r.split("|")) for r in BAD_VALUES.strip().splitlines())
}
"""A bad value of every switch (at 2 ranks) and what its one-line message says."""
ROOT = Path(__file__).resolve().parents[2]


def test_every_switch_has_a_bad_value_here():
    assert sorted(BAD) == sorted(SWITCHES)


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_switch_is_one_line_naming_it(name):
    value, says = BAD[name]
    with pytest.raises(ConfigError) as e:
        check_switches({name: value}, world_size=2)
    msg = str(e.value)
    assert msg.startswith(f"{name}={value!r}: ") and says in msg and "\n" not in msg, msg
    with pytest.raises(ValueError, match=f"^{name}="):
        switch(name, {name: value} if not name.startswith("SUITE_INJECT_") else {name: "nonsense:::::"})


def test_unset_or_empty_is_the_default():
    for name, sw in SWITCHES.items():
        assert switch(name, {}) == sw.value_if_unset == switch(name, {name: "  "}), name
    assert (switch("SUITE_PROGRESS", {}), switch("SUITE_PROGRESS_S", {}), switch("SUITE_REPORT", {})) == (
        "auto",
        30.0,
        True,
    )
    check_switches({})
    check_switches(dict.fromkeys(SWITCHES, ""))


def test_good_values_read_as_documented():
    assert switch("SUITE_PROGRESS", {"SUITE_PROGRESS": " Plain "}) == "plain"
    assert switch("SUITE_PROGRESS_S", {"SUITE_PROGRESS_S": "0"}) == 0.0
    assert switch("SUITE_REPORT", {"SUITE_REPORT": "0"}) is False
    assert switch("SUITE_KEEP_RANK_SAMPLES", {"SUITE_KEEP_RANK_SAMPLES": "On"}) is True
    assert switch("SUITE_ALL_RANKS_OUTPUT", {"SUITE_ALL_RANKS_OUTPUT": "0"}) is False
    assert switch("SUITE_PROFILE", {"SUITE_PROFILE": "all"}) is True
    assert switch("SUITE_PROFILE", {"SUITE_PROFILE": "all_reduce"}) == "all_reduce"
    assert switch("SUITE_GIT_COMMIT", {"SUITE_GIT_COMMIT": "abc123"}) == "abc123"
    d = switch("SUITE_INJECT_DELAY", {"SUITE_INJECT_DELAY": "1:0.5:all_reduce@before"})
    assert (d.rank, d.seconds, d.name, d.when) == (1, 0.5, ("all_reduce",), "before")


def test_a_fault_switch_checks_the_rank_against_the_world_only_when_told_it():
    check_switches({"SUITE_INJECT_FAULT": "kill:3:0"})
    with pytest.raises(ConfigError, match="rank 3 is not a rank of this run"):
        check_switches({"SUITE_INJECT_FAULT": "kill:3:0"}, world_size=2)


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_launcher_rejects_a_bad_switch_before_any_rank_starts(name, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(name, BAD[name][0])
    code = launch.main(["--check", "--nproc", "2", "--results-root", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {name}=") and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()


def test_a_bad_switch_exits_2_from_a_real_launcher(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "suite.launch", "--nproc", "2", "--results-root", str(tmp_path / "r")],
        cwd=ROOT,
        env={**os.environ, "SUITE_REPORT": "maybe"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "error: SUITE_REPORT='maybe': choose 1 (on) or 0 (off)\n"
    assert not (tmp_path / "r").exists()


def _switch_names_read_outside_the_table(source: str) -> list[tuple[int, str]]:
    """(line, name) of each ``SUITE_*`` string in ``source`` that is not the first argument of a
    ``switch(...)`` call; docstrings do not count."""
    tree = ast.parse(source)
    docs = set()
    for n in ast.walk(tree):
        body = getattr(n, "body", None)
        for stmt in body if isinstance(body, list) else ():
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                docs.add(id(stmt.value))
    through = {
        id(n.args[0])
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "switch" and n.args
    }
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and n.value.startswith("SUITE_")
        and id(n) not in docs | through
    ]


def test_every_switch_is_read_through_the_table():
    """Only the table's modules spell a switch's name (switches.py, and faults.py's grammar); every other
    module reads it with ``switch("SUITE_...")``, whose name must be in the table."""
    found = {}
    for p in sorted((ROOT / "suite").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel in ("suite/common/switches.py", "suite/common/faults.py"):
            continue
        if hits := _switch_names_read_outside_the_table(p.read_text()):
            found[rel] = hits
    assert not found, f"read a SUITE_* switch outside suite.common.switches.switch: {found}"
    called = set(
        re.findall(r"\bswitch\(\"(SUITE_\w+)\"", "".join(p.read_text() for p in (ROOT / "suite").rglob("*.py")))
    )
    assert called <= set(SWITCHES), called - set(SWITCHES)


def test_the_read_check_sees_a_direct_read_and_passes_the_accessor():
    src = '"""SUITE_X in prose."""\nimport os\nos.environ.get("SUITE_REPORT")\nswitch("SUITE_REPORT")\n'
    assert _switch_names_read_outside_the_table(src) == [(3, "SUITE_REPORT")]


def _docs_table() -> dict[str, str]:
    """docs/switches.md's table: switch -> its default column."""
    text = (ROOT / "docs" / "switches.md").read_text()
    return dict(re.findall(r"^\| `(SUITE_\w+)` \| ([^|]*?) \|", text, re.M))


def test_the_docs_table_lists_every_switch_with_its_default():
    assert _docs_table() == {name: sw.default for name, sw in SWITCHES.items()}


def test_every_switch_the_docs_name_exists():
    """A switch renamed or removed leaves no stale name in README.md, CONTRIBUTING.md or docs/*.md (a
    ``SUITE_X_*`` family names a prefix of switches); an experiment's knob (its settings' env) is not a switch
    but may appear. CHANGELOG.md is history: it may name what is gone."""
    known = set(SWITCHES) | {k.env for k in ENV_KNOBS}
    stale = set()
    for p in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for name in re.findall(r"\bSUITE_[A-Z0-9_]+", p.read_text()):
            if name.endswith("_") and any(k.startswith(name) for k in SWITCHES):
                continue
            if name not in known:
                stale.add(f"{p.name}: {name}")
    assert not stale, sorted(stale)


def test_make_help_lists_every_switch():
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout
    _, _, tail = out.partition("environment switches (docs/switches.md):")
    assert tail, out
    assert re.findall(r"\bSUITE_\w+", tail) == list(SWITCHES)
