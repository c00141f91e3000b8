"""The test tiers are folders, `make test` runs each (scripts/tiers.py: the unit tier first, stopping at its
first failure), and nothing in the pytest configuration keeps `pytest tests` from collecting one of them.
That pytest really collects every file is tests/e2e/test_tiers_collected.py (it imports the whole tree:
seconds, too slow for this tier). No test module imports another: what tests share is in tests/helpers/ (and
a tier's fixtures in its conftest.py), so a tier runs alone and a test file is only ever collected as a test."""

from __future__ import annotations

import ast
import re
from fnmatch import fnmatch
from pathlib import Path

from tests.conftest import load_script
from tests.helpers.tiers import ROOT, tier_files

TIERS = ("unit", "dist", "e2e", "docker", "gpu")


def test_every_test_file_is_in_a_tier():
    files = tier_files()
    assert files and all(f.split("/")[1] in TIERS for f in files), files
    # each tier a package: same-named files in two tiers (test_doctor.py, test_p2p.py) collect side by side
    assert all((ROOT / "tests" / t / "__init__.py").exists() for t in TIERS)


def test_the_pytest_configuration_recurses_into_every_tier(pytestconfig):
    # the configuration this very run uses (pyproject.toml [tool.pytest.ini_options])
    assert pytestconfig.inipath == ROOT / "pyproject.toml"
    assert pytestconfig.getini("testpaths") == ["tests"]
    # an explicit norecursedirs, because pytest's default skips any folder named "dist"
    skipped = [(t, pat) for t in TIERS for pat in pytestconfig.getini("norecursedirs") if fnmatch(t, pat)]
    assert not skipped, skipped
    assert pytestconfig.getini("python_files") == ["test_*.py", "*_test.py"]
    for conftest in (ROOT / "tests").rglob("conftest.py"):
        assert "collect_ignore" not in conftest.read_text(), conftest


def test_make_test_runs_every_tier_and_the_docs_give_each_its_budget():
    tiers = load_script("tiers")
    assert tuple(tiers.BUDGET_S) == TIERS  # scripts/tiers.py runs them all, cheapest first
    doc = (ROOT / "docs" / "tests.md").read_text()
    for tier, budget in tiers.BUDGET_S.items():
        assert f"| `{tier}/` | {budget} s |" in doc, tier


def _tree(root: Path, tests: dict[str, str]) -> Path:
    for name, body in tests.items():
        (root / "tests" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "tests" / name).write_text(body)
    return root


def test_a_failing_unit_tier_stops_the_run_before_the_others(tmp_path, capfd):
    tiers = load_script("tiers")
    root = _tree(
        tmp_path,
        {
            "unit/test_a.py": "def test_one():\n    assert False\n\ndef test_two():\n    open('two', 'w')\n",
            "dist/test_b.py": "def test_three():\n    open('three', 'w')\n",
        },
    )
    # 1: failed; 2: interrupted, as xdist ends a run that -x stopped while a worker still held tests
    assert tiers.main(["--tiers", "unit,dist"], root=root) in (1, 2)
    out = capfd.readouterr().out
    assert not (root / "three").exists()  # dist never started (test_two may run: xdist hands out tests ahead)
    assert re.search(r"^# tier unit: \d+ s \(budget \d+ s\), pytest status [12]$", out, re.M), out
    assert "# the unit tier failed: the other tiers did not run" in out and "# tier dist" not in out


def test_later_tiers_all_run_and_a_tier_with_nothing_selected_passes(tmp_path, capfd):
    tiers = load_script("tiers")
    root = _tree(
        tmp_path,
        {
            "unit/test_a.py": "def test_one():\n    pass\n",
            "dist/test_b.py": "def test_two():\n    assert False\n",
            "e2e/test_c.py": "import pytest\n\n@pytest.mark.docker\ndef test_three():\n    pass\n",
            "docker/test_d.py": "def test_four():\n    open('four', 'w')\n",
        },
    )
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\nmarkers = ["docker: x"]\n')
    assert tiers.main(["--tiers", "unit,dist,e2e,docker", "--", "-m", "not docker"], root=root) == 1
    out = capfd.readouterr().out
    assert (root / "four").exists()  # a failing dist tier does not stop the later ones
    assert re.search(r"^# tier dist: .*pytest status 1$", out, re.M) and re.search(
        r"^# tier e2e: \d+ s \(budget \d+ s\)$", out, re.M
    )
    assert out.rstrip().splitlines()[-5:][0] == "# tiers:"


def test_test_paths_choose_what_each_tier_runs_and_a_tier_without_one_is_skipped(tmp_path, capfd):
    tiers = load_script("tiers")
    body = "def test_{n}():\n    open('{n}', 'w')\n"
    root = _tree(
        tmp_path, {f"{t}/test_{n}.py": body.format(n=n) for t, n in (("unit", "a"), ("unit", "b"), ("e2e", "c"))}
    )
    got = tiers.main(
        ["--tiers", "unit,dist,e2e", "--", "tests/unit/test_b.py::test_b", "-p", "no:cacheprovider"], root=root
    )
    out = capfd.readouterr().out
    assert got == 0 and (root / "b").exists() and not (root / "a").exists() and not (root / "c").exists(), out
    assert "# tier dist: skipped (none of the test paths given is in tests/dist)" in out
    assert "# tier e2e: skipped (none of the test paths given is in tests/e2e)" in out
    assert tiers.selection("e2e", ["-k", "x"], root) == (["tests/e2e"], ["-k", "x"])  # no path: the whole folder
    assert tiers.selection("e2e", ["./tests/e2e/test_c.py", "-k", "tests"], root) == (
        ["./tests/e2e/test_c.py"],
        ["-k", "tests"],
    )


def test_an_unknown_tier_is_refused_in_one_line(capsys):
    assert load_script("tiers").main(["--tiers", "unit,nightly"]) == 2
    assert capsys.readouterr().err == "error: unknown tier(s) nightly; choose from unit, dist, e2e, docker, gpu\n"


def imported_test_modules(source: str, package: str = "tests") -> list[str]:
    """The test modules (``test_*``) that ``source`` imports, absolute or relative (``package``: the importing
    module's package, for a relative import)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if any(p.startswith("test_") for p in a.name.split("."))]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if any(p.startswith("test_") for p in base.split(".")):
                out.append(base)
            else:
                out += [f"{base}.{a.name}" for a in node.names if a.name.startswith("test_")]
    return out


def test_no_test_module_imports_another():
    found = {}
    for f in sorted((ROOT / "tests").rglob("*.py")):
        rel = f.relative_to(ROOT)
        package = ".".join(rel.parent.parts)
        if imported := imported_test_modules(f.read_text(), package):
            found[rel.as_posix()] = imported
    assert not found, f"test modules imported as libraries (move what they share to tests/helpers/): {found}"


def test_the_test_import_check_sees_absolute_relative_and_from_imports():
    assert imported_test_modules("from tests.unit.test_p2p import TINY") == ["tests.unit.test_p2p"]
    assert imported_test_modules("import tests.dist.test_p2p as p") == ["tests.dist.test_p2p"]
    assert imported_test_modules("from tests.unit import test_compare") == ["tests.unit.test_compare"]
    assert imported_test_modules("from .test_doctor import _run", "tests.unit") == ["tests.unit.test_doctor"]
    assert imported_test_modules("from . import test_doctor", "tests.unit") == ["tests.unit.test_doctor"]
    helpers = "from tests.helpers.p2p import TINY\nfrom tests.conftest import ROOT\nimport pytest\n# test_x"
    assert imported_test_modules(helpers) == []


def test_the_unit_tier_runs_in_one_worker_per_core_and_the_others_one_test_at_a_time(tmp_path, capfd, monkeypatch):
    """Each test writes the xdist worker it ran in: the unit tier's two tests in workers, the dist tier's in
    the one pytest process its ranks share the cores with."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test's own worker, when it runs in one
    tiers = load_script("tiers")
    body = "import os\n\ndef test_{n}():\n    open('{n}', 'w').write(os.environ.get('PYTEST_XDIST_WORKER', 'main'))\n"
    root = _tree(
        tmp_path,
        {
            "unit/test_a.py": body.format(n="one") + body.format(n="two").split("\n\n", 1)[1],
            "dist/test_b.py": body.format(n="three"),
        },
    )
    assert tiers.main(["--tiers", "unit,dist"], root=root) == 0
    capfd.readouterr()
    assert (root / "one").read_text().startswith("gw") and (root / "two").read_text().startswith("gw")
    assert (root / "three").read_text() == "main"
