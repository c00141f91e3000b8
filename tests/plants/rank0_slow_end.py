"""Planted delay: rank 0 takes 3 s more than the others to end its session (a results file on a slow
disk, a big report), after the cases and before its last write. When a case failed every rank exits 1,
and torchrun ends the whole job at the first non-zero exit: the other ranks must not leave before rank 0
has written bench.json and printed its tables. tests/e2e/test_failures.py checks that nothing is lost.
"""

import os
import time

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    if os.environ.get("RANK") == "0":
        time.sleep(3)
