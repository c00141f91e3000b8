"""The test tiers are folders, and nothing in the pytest configuration keeps `make test` (pytest tests)
from collecting one of them. That pytest really collects every file is tests/e2e/test_tiers_collected.py
(it imports the whole tree: seconds, too slow for this tier)."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIERS = ("unit", "dist", "e2e", "docker", "gpu")


def tier_files() -> list[str]:
    """Every test file of the project, relative to the checkout."""
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))


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
