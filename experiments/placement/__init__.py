"""Placement: where ranks and tensors live, and what it costs."""

from suite.case import ExperimentSpec, collected

SPEC = ExperimentSpec(
    name="placement",
    cases=collected(f"{__name__}.cases"),
)
