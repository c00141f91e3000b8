"""The docker tier's fixtures: ``image``, the suite's image built (or found cached) once a session, and ``sim``, a
multi-node compose simulation of it in a test's folder (tests/helpers/docker.py ``Sim``), stopped afterwards."""

from __future__ import annotations

import pytest

from tests.helpers.docker import IMAGE, Sim, make_image


@pytest.fixture(scope="session")
def image() -> str:
    """`make image`, once per session (seconds when cached, ~3 min cold with the base)."""
    make_image(f"IMAGE={IMAGE}", timeout=900)
    return IMAGE


@pytest.fixture
def sim(tmp_path, image):
    s = Sim(tmp_path, image)
    yield s
    s.cleanup()
