"""Backends: the same cases on every backend the build and device offer, side by side."""

from suite.api import ExperimentSpec, collected, later

from . import table

SPEC = ExperimentSpec(
    name="backends",
    cases=collected(f"{__name__}.cases"),
    table=table.format_tables,
    guide=table.__doc__,
    link_points=lambda rec: rec.get("table") == "compare",  # the collectives timed alone on each backend
    headline=table.headline,
    glance=later(f"{__name__}.report:glance"),
)
