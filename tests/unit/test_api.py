"""suite.api, the one module experiments import from suite: every public name is its home's object,
loaded on first use, and an unknown name is an AttributeError that says where the names are."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import suite.api as api

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_is_the_object_of_its_home():
    assert api.__all__ == sorted(api.HOMES) and len(api.__all__) > 30
    for name, home in api.HOMES.items():
        module = importlib.import_module(home)
        want = getattr(module, name) if name in api.NAMES else module
        assert getattr(api, name) is want, name


def test_a_module_is_exported_under_its_last_name():
    from suite.harness import verify
    from suite.harness import groups

    assert api.verify is verify and api.groups is groups


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="suite.api has no 'runner'"):
        api.runner  # noqa: B018
    with pytest.raises(ImportError):
        from suite.api import make_record  # noqa: F401


def test_reading_a_spec_through_the_api_imports_no_torch():
    code = "import sys\nfrom suite.api import ExperimentSpec, collected, later\nsys.exit('torch' in sys.modules)\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_static_tools_see_every_public_name_from_its_home():
    # the TYPE_CHECKING block of suite/api.py: type checkers and import graphs read it, the run never does; it
    # must name exactly the tables' names, each from its home
    import ast

    tree = ast.parse((ROOT / "suite" / "api.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.unparse(node)
        for a in node.names:
            home = f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in api.MODULES else node.module
            seen[a.asname or a.name] = home
    assert seen == api.HOMES
