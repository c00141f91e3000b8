"""The experiments of this checkout: ``discover()`` imports every package ``experiments/<name>/`` and
returns its ``SPEC`` (suite.case.ExperimentSpec), by name.

This is the one place the core reaches experiments (rule R1, tests/unit/test_import_graph.py): the
config's sections, the launcher's list, the tables and the report's special sections all come from
the specs, so adding an experiment is adding a folder. Importing a spec is light (no torch.distributed;
see ExperimentSpec), so offline code may call ``discover()`` too.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

from suite.case import ExperimentSpec

PACKAGE = "experiments"
DIR = Path(__file__).resolve().parent.parent / PACKAGE


class RegistryError(RuntimeError):
    """An experiment folder without a valid SPEC: a bug in the checkout, not in the run's input."""


def folders(root: Path = DIR) -> list[str]:
    """The experiment folders' names: packages under ``root`` (not ``_private`` or ``__pycache__``)."""
    return sorted(p.parent.name for p in root.glob("*/__init__.py") if not p.parent.name.startswith("_"))


@functools.cache
def discover() -> dict[str, ExperimentSpec]:
    """Every experiment's SPEC by name (folder order); the same dict on every call."""
    return load(DIR, PACKAGE)


def load(root: Path, package: str) -> dict[str, ExperimentSpec]:
    """The SPEC of every folder of ``root`` (the importable package ``package``), by name; RegistryError
    for a folder without one, or with a SPEC named otherwise than its folder."""
    specs = {}
    for name in folders(root):
        where = root / name / "__init__.py"
        spec = getattr(importlib.import_module(f"{package}.{name}"), "SPEC", None)
        if not isinstance(spec, ExperimentSpec):
            raise RegistryError(f"{where} defines no SPEC = ExperimentSpec(...)")
        if spec.name != name:
            raise RegistryError(f"{where}: SPEC.name is {spec.name!r}, not its folder's name {name!r}")
        specs[name] = spec
    return specs


def spec(name: str) -> ExperimentSpec | None:
    """The SPEC of experiment ``name``, or None for a name this checkout does not have (an older run's)."""
    return discover().get(name)


def cases_file(name: str) -> Path:
    """The file the launcher hands to pytest for experiment ``name``."""
    return DIR / name / "cases.py"


def experiment_of(nodeid: str) -> str:
    """The experiment a pytest test id belongs to: ``experiments/<name>/cases.py::test_x[...]`` (and an
    older run's ``experiments/<name>.py::test_x[...]``) -> ``<name>``."""
    parts = nodeid.partition("::")[0].split("/")
    if len(parts) >= 2 and parts[-1] == "cases.py":
        return parts[-2]
    return parts[-1].removesuffix(".py")
