"""Backends: the same cases on every backend the build and device offer, side by side."""

from suite.case import ExperimentSpec, collected

SPEC = ExperimentSpec(
    name="backends",
    cases=collected(f"{__name__}.cases"),
)
