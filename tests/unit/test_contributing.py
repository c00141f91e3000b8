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


def test_the_readme_gives_each_role_one_line_and_points_to_the_tour():
    # the README's code layout: one line per package of suite/ (its roles, as `ls suite/` shows them), the
    # shared modules and experiments/; the modules are the tour's
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Tests and contributing") :]
    block = section[section.index("```\n") + 4 : section.index("```", section.index("```\n") + 4)]
    named = [line.split()[0] for line in block.splitlines()]
    packages = sorted(f"suite/{p.parent.name}/" for p in (ROOT / "suite").glob("*/__init__.py"))
    assert sorted(n for n in named if n.startswith("suite/") and n.endswith("/")) == packages
    assert named[-2:] == ["suite/*.py", "experiments/"] and len(named) == len(packages) + 2
    assert "(CONTRIBUTING.md#code-tour)" in section
