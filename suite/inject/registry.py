"""The injection classes: every module of suite/inject/classes/ that binds ``CLASS``, in ``order``.

Adding a class is adding its file (tests/unit/test_inject.py adds one to a copy of the folder)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from .kind import InjectionClass

CLASSES_DIR = Path(__file__).resolve().parent / "classes"
PACKAGE = f"{__package__}.classes"


def discover(folder: Path = CLASSES_DIR, package: str = PACKAGE) -> dict[str, InjectionClass]:
    """Class name -> its record, from each module of ``folder`` (importable as ``package``); a module's
    ``CLASS.name`` must be the module's name."""
    found = []
    for info in pkgutil.iter_modules([str(folder)]):
        if info.name.startswith("_"):
            continue
        record = importlib.import_module(f"{package}.{info.name}").CLASS
        if record.name != info.name:
            raise ValueError(f"{folder / info.name}.py binds CLASS named {record.name!r}: name it {info.name!r}")
        found.append(record)
    return {c.name: c for c in sorted(found, key=lambda c: (c.order, c.name))}
