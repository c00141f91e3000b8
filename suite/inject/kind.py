"""What one class of injection is (``InjectionClass``), and what it acts on (``Target``, a local rank; ``Node``, a
node of the compose simulation).

A class is one file in suite/inject/classes/ that binds ``CLASS = InjectionClass(...)``; the registry
(suite/inject/registry.py) finds it there. ``start`` begins the effect on a target and returns an ``Effect``
whose ``stop`` undoes it; the controller (suite/inject/controller.py) calls ``stop`` at the end of the
stretch, at the run's end and whenever it exits. A node's class has ``node`` instead, which the host's controller
(suite/inject/host.py) calls on the compose node of the target rank.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class Effect(Protocol):
    def stop(self) -> None:
        """Undo the effect (idempotent; never raises)."""


@dataclass(frozen=True)
class Target:
    """A local rank the controller found: its number, its process and the cores it may run on."""

    rank: int
    pid: int
    cores: frozenset[int]


@dataclass(frozen=True)
class Node:
    """A node of the compose simulation, as the host's controller sees it (suite/inject/host.py): its service name
    (``node<i>``) and its container's id."""

    name: str
    container: str


@dataclass(frozen=True, kw_only=True)
class InjectionClass:
    """One class of injection: its name (= its file's name), where it works, and its severity's meaning."""

    name: str
    """What ``INJECT=<class>`` names."""
    order: int
    """Its place in the list (``random`` draws among the local classes in this order)."""
    summary: str
    """One line: what it does to the target."""
    severity: str
    """What the severity number means, with its unit."""
    limits: tuple[float, float]
    """The severities accepted (both ends included)."""
    drawn: tuple[float, float]
    """The severities ``random`` (or an omitted severity) draws from, inside ``limits``."""
    start: Callable[[Target, float], Effect] | None = None
    """Begin the effect on a local target rank at a severity; the Effect's ``stop`` undoes it (None: a class of the
    compose simulation's nodes only)."""
    node: Callable[[Node, float], Effect] | None = None
    """Begin the effect on the node of the target rank in the compose simulation, from the host (suite/inject/host.py,
    through docker); None: no effect on a node (its class acts on ranks, in each node's own controller)."""
    integer: bool = False
    """A count (processes): the severity is a whole number."""

    @property
    def local(self) -> bool:
        """Works on local ranks (torchrun's children on this host)."""
        return self.start is not None
