"""The doctor: is anything wrong, and where (a health check, not a benchmark: ``make doctor``)."""

from suite.case import ExperimentSpec, collected

SPEC = ExperimentSpec(
    name="doctor",
    cases=collected(f"{__name__}.cases"),
    in_all=False,
)
