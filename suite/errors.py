"""Outcomes of a case that are not a measurement, raised by the harness on every rank alike.

The pytest bridge (suite/harness/pytest/plugin.py) turns them into pytest's skip and fail; nothing
else in the suite imports pytest.
"""

from __future__ import annotations


class NeedsRanks(str):
    """A skip reason that says the case needs more ranks than the world has: the reason's text, and ``ranks``, the
    world size the case needs. A case's ``skip`` hook returns it as it returns any reason; the skip's record keeps
    ``ranks`` as ``needs_ranks``, which the launcher's second pass reads (suite/launch/passes.py)."""

    ranks: int

    def __new__(cls, ranks: int, text: str) -> NeedsRanks:
        reason = super().__new__(cls, text)
        reason.ranks = int(ranks)
        return reason

    def __reduce__(self):  # pickled (an object collective, a worker) as what it is, its ranks kept
        return NeedsRanks, (self.ranks, str(self))


class CaseSkipped(Exception):
    """This case cannot run here (the same decision on every rank); the message says why. ``needs_ranks``: the world
    size it needs, where it is skipped for want of ranks (given, or that of a ``NeedsRanks`` reason); else None."""

    def __init__(self, reason: object = "", *, needs_ranks: int | None = None):
        super().__init__(reason)
        self.needs_ranks = needs_ranks if needs_ranks is not None else getattr(reason, "ranks", None)


class StepNotTaken(CaseSkipped):
    """A probe's step that its stop rule did not take (the link probe's steps beyond the sweep, declared ahead as
    every case is). It is no case the run was asked for: no list of skipped cases names it (the pytest bridge,
    suite/harness/pytest/plugin.py), and the probe's records say how far it went and why it stopped."""


class CaseFailed(AssertionError):
    """The case ran and its result is wrong (e.g. wrong elements); the same on every rank."""


class ConfigError(ValueError):
    """A knob has a value the suite cannot run with; the message names the fix (suite.common.config, and an
    experiment's ``Settings.validate``)."""
