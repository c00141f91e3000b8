"""The registry of backend records: every file of this package binding ``BACKEND = Backend(...)``, in the order of
its ``order``, found once when the package is imported (adding a backend is adding its file). Torch-free, as are
the records until a probe is called: the offline model reads them too."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from suite.common.backends.record import Backend

PACKAGE = "suite.common.backends"
_NOT_RECORDS = {"record", "registry"}


def registry_of(found: list[Backend]) -> dict[str, Backend]:
    """Name -> record of ``found``, in the order of their ``order``: each name an identifier other than
    ``auto``, and once."""
    out: dict[str, Backend] = {}
    for record in sorted(found, key=lambda b: (b.order, b.name)):
        if record.name == "auto" or not record.name.isidentifier():
            raise ValueError(f"a backend's name is an identifier other than 'auto', got {record.name!r}")
        if record.name in out:
            raise ValueError(f"backend {record.name!r} is registered twice")
        out[record.name] = record
    return out


def _discover() -> dict[str, Backend]:
    found = []
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if mod.name.startswith("_") or mod.name in _NOT_RECORDS:
            continue
        record = getattr(importlib.import_module(f"{PACKAGE}.{mod.name}"), "BACKEND", None)
        if isinstance(record, Backend):
            found.append(record)
    return registry_of(found)


def records() -> tuple[Backend, ...]:
    """Every registered backend, in registry order."""
    return tuple(_REGISTRY.values())


backend_records = records
"""``records`` under the name suite.api gives it."""


def names() -> tuple[str, ...]:
    """Every registered backend's name (BACKEND= takes these, or auto)."""
    return tuple(_REGISTRY)


def record_of(name: str) -> Backend:
    """The record of backend ``name``; for a name no file registers (a group the suite made itself under
    another name) a plain record of that name, which claims nothing."""
    return _REGISTRY.get(name) or Backend(name=name)


_REGISTRY = _discover()
