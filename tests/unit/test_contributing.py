"""CONTRIBUTING.md's code tour names every module (suite/__init__.py says so): a module added without its
line in the tour fails here, and so does a tour line left behind when the module goes."""

from __future__ import annotations

import re

from tests.conftest import ROOT

P2P = ROOT / "suite" / "ops" / "p2p"


def code_tour() -> str:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    start = text.index("## Code tour")
    return text[start : text.index("\n## ", start + 1)]


def modules() -> list:
    """Every module of suite/ and experiments/ but packages' __init__/__main__ and the p2p pattern files
    (the tour names their folder: one file each, listed in PATTERNS)."""
    out = []
    for f in sorted([*(ROOT / "suite").rglob("*.py"), *(ROOT / "experiments").rglob("*.py")]):
        if f.name in ("__init__.py", "__main__.py"):
            continue
        if f.parent == P2P and re.search(r"^PATTERN = ", f.read_text(), re.M):
            continue
        out.append(f)
    return out


def test_code_tour_names_every_module():
    tour = code_tour()
    missing = [str(f.relative_to(ROOT)) for f in modules() if not re.search(rf"\b{re.escape(f.name)}\b", tour)]
    assert not missing, f"modules the code tour of CONTRIBUTING.md does not name: {missing}"


def test_code_tour_names_every_experiment_folder():
    tour = code_tour()
    folders = sorted(p.parent.name for p in (ROOT / "experiments").glob("*/__init__.py"))
    assert folders
    missing = [name for name in folders if not re.search(rf"^\s+{name}/ ", tour, re.M)]
    assert not missing, f"experiment folders the code tour of CONTRIBUTING.md does not name: {missing}"


def test_code_tour_names_no_module_that_is_gone():
    tour = code_tour()
    named = set(re.findall(r"\b([a-z_][a-z0-9_]*\.py)\b", tour))
    present = {f.name for f in [*(ROOT / "suite").rglob("*.py"), *(ROOT / "experiments").rglob("*.py")]}
    present |= {f.name for f in (ROOT / "examples").rglob("*.py")}
    gone = sorted(named - present)
    assert not gone, f"the code tour of CONTRIBUTING.md names modules that do not exist: {gone}"


def test_the_readme_points_to_the_tour_and_keeps_no_tree_of_its_own():
    # the code's layout has one place, the tour: the README, a newcomer's two minutes, links it
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Tests and contributing") :]
    assert "(CONTRIBUTING.md#code-tour)" in section
    assert "suite/launch/" not in text and "suite/harness/" not in text
