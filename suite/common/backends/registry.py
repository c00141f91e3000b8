"""The registry of backend records: every file of this package binding ``BACKEND = Backend(...)``, in the order of
its ``order``, found when the package is imported; ``register`` adds one from elsewhere (a plugin, a test).
Torch-free, as are the records until a probe is called: the offline model reads them too."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from suite.common.backends.record import Backend

PACKAGE = "suite.common.backends"
_REGISTRY: dict[str, Backend] = {}
_NOT_RECORDS = {"record", "registry"}


def register(backend: Backend) -> Backend:
    """Add ``backend`` to the registry (once per name); the record."""
    if backend.name in ("", "auto") or not backend.name.isidentifier():
        raise ValueError(f"a backend's name is an identifier other than 'auto', got {backend.name!r}")
    known = _REGISTRY.get(backend.name)
    if known is not None and known != backend:
        raise ValueError(f"backend {backend.name!r} is registered already")
    _REGISTRY[backend.name] = backend
    return backend


def _discover() -> None:
    found = []
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if mod.name.startswith("_") or mod.name in _NOT_RECORDS:
            continue
        record = getattr(importlib.import_module(f"{PACKAGE}.{mod.name}"), "BACKEND", None)
        if isinstance(record, Backend):
            found.append(record)
    for record in sorted(found, key=lambda b: (b.order, b.name)):
        register(record)


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


_discover()
