"""Placement: where ranks and tensors live, and what it costs."""

from suite.api import ExperimentSpec, collected, later

from . import table
from .settings import PlacementSettings

SPEC = ExperimentSpec(
    name="placement",
    cases=collected(f"{__name__}.cases"),
    settings=PlacementSettings,
    table=table.format_tables,
    guide=table.__doc__,
    headline=table.headline,
    glance=later(f"{__name__}.report:glance"),
)
