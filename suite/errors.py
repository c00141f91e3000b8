"""Outcomes of a case that are not a measurement, raised by the harness on every rank alike.

The pytest bridge (suite/harness/pytest/plugin.py) turns them into pytest's skip and fail; nothing
else in the suite imports pytest.
"""

from __future__ import annotations


class CaseSkipped(Exception):
    """This case cannot run here (the same decision on every rank); the message says why."""


class CaseFailed(AssertionError):
    """The case ran and its result is wrong (e.g. wrong elements); the same on every rank."""


class ConfigError(ValueError):
    """A knob has a value the suite cannot run with; the message names the fix (suite.common.config, and an
    experiment's ``Settings.validate``)."""
