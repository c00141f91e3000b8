"""COLLECTIVES_GROUPS: the groups each collective runs on."""

import dataclasses

import pytest

from experiments.collectives import cases
from experiments.collectives.settings import CollectivesSettings
from suite.errors import ConfigError
from suite.common.config import BenchConfig


def test_an_unknown_group_is_refused_naming_the_knob():
    CollectivesSettings(groups=("world", "interleaved")).validate()
    for bad in (("odd",), ()):
        with pytest.raises(ConfigError, match="COLLECTIVES_GROUPS"):
            CollectivesSettings(groups=bad).validate()


def test_interleaved_cases_are_the_world_cases_on_the_even_and_odd_halves():
    cfg = BenchConfig(min_bytes=1024, max_bytes=1024, redops=("sum",), dtypes=("float32",))
    world = cases.cases(cfg, 4)
    groups = dataclasses.replace(cfg.collectives, groups=("world", "interleaved"))
    halves = [c for c in cases.cases(dataclasses.replace(cfg, collectives=groups), 4) if c.identity.get("group")]
    assert [c.label + "-interleaved" for c in world] == [c.label for c in halves]
    assert all(c.fields["groups"] == [[0, 2], [1, 3]] and c.context is not None for c in halves)
