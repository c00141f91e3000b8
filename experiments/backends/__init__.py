"""Backends: the same cases on every backend the build and device offer, side by side."""

from suite.api import ExperimentSpec, collected

from . import table

SPEC = ExperimentSpec(
    name="backends",
    cases=collected(f"{__name__}.cases"),
    table=table.format_tables,
    guide=table.__doc__,
)
