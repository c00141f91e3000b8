"""The test tiers' files."""

from __future__ import annotations

from tests.conftest import ROOT


def tier_files() -> list[str]:
    """Every test file of the project, relative to the checkout."""
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))
