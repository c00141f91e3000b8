"""suite.registry: every experiment folder's SPEC, and the errors of a folder without a valid one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from suite import registry
from suite.case import ExperimentSpec
from suite.common.config import BenchConfig

ROOT = Path(__file__).resolve().parents[2]

SPEC_TEXT = """from suite.case import ExperimentSpec, collected

SPEC = ExperimentSpec(name={name!r}, cases=collected(__name__ + ".cases"))
"""


def _package(tmp_path, monkeypatch, folders: dict[str, str]):
    """A package of experiment folders, importable under a name of its own (one per test)."""
    pkg = tmp_path / ("exps_" + re.sub(r"\W", "_", tmp_path.name))
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, init in folders.items():
        (pkg / name).mkdir()
        (pkg / name / "__init__.py").write_text(init)
    monkeypatch.syspath_prepend(str(tmp_path))
    return pkg


def test_discover_finds_every_folder_and_only_folders():
    specs = registry.discover()
    assert list(specs) == registry.folders() == sorted(p.parent.name for p in registry.DIR.glob("*/__init__.py"))
    assert all(isinstance(s, ExperimentSpec) and s.name == n for n, s in specs.items())
    assert registry.discover() is specs  # cached: imported once per process
    assert registry.spec("no_such_experiment") is None


def test_a_spec_declares_the_cases_its_cases_file_runs():
    cases = registry.discover()["collectives"].cases(BenchConfig(min_bytes=1024, max_bytes=1024), 2)
    assert cases and {c.experiment for c in cases} == {"collectives"}


def test_a_folder_without_a_spec_is_named(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, {"good": SPEC_TEXT.format(name="good"), "bare": "X = 1\n"})
    with pytest.raises(registry.RegistryError, match=r"bare/__init__.py defines no SPEC"):
        registry.load(pkg, pkg.name)


def test_a_spec_named_otherwise_than_its_folder_is_named(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, {"alpha": SPEC_TEXT.format(name="beta")})
    with pytest.raises(registry.RegistryError, match=r"SPEC.name is 'beta', not its folder's name 'alpha'"):
        registry.load(pkg, pkg.name)


def test_private_folders_are_no_experiments(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, {"_shared": "", "one": SPEC_TEXT.format(name="one")})
    assert list(registry.load(pkg, pkg.name)) == ["one"]


def test_experiment_of_a_test_id():
    assert registry.experiment_of("experiments/ddp/cases.py::test_ddp[mlp]") == "ddp"
    assert registry.experiment_of("experiments/ddp.py::test_ddp[mlp]") == "ddp"  # a run stored before the folders
    assert registry.experiment_of("tests/unit/test_x.py::test_y") == "test_x"


READ_SPECS_WITHOUT_TORCH = """
import sys
from suite import registry
specs = registry.discover()
for spec in specs.values():
    spec.table and spec.guide  # what the report reads of a spec
import suite.common.config, suite.report.compare, suite.report.tables, suite.report.cli
heavy = sorted(m for m in ("torch", "torch.distributed") if m in sys.modules)
sys.exit(f"reading the specs imported {heavy}" if heavy else 0)
"""


def test_reading_the_specs_imports_no_torch():
    # offline code (report, compare, tables) reads the specs: an experiment's __init__.py must stay light,
    # its cases and heavy hooks resolved only when called (collected, later)
    proc = subprocess.run(
        [sys.executable, "-c", READ_SPECS_WITHOUT_TORCH], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
