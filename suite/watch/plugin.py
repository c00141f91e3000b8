"""The watch's pytest hook (the harness's plugin names this module in its ``pytest_plugins``): before each case runs,
this rank's timeline gets a ``console`` that writes past pytest's capture of the case (suite/watch/console.py)."""

from __future__ import annotations

import functools

import pytest

from suite.watch import console


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    t = console.timeline()
    if t is not None:
        t.console = functools.partial(console.write, item.config.pluginmanager.getplugin("capturemanager"))
    return (yield)
