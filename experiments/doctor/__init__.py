"""The doctor: is anything wrong, and where (a health check, not a benchmark: ``make doctor``)."""

from suite.case import ExperimentSpec, collected

from .settings import DoctorSettings

SPEC = ExperimentSpec(
    name="doctor",
    cases=collected(f"{__name__}.cases"),
    settings=DoctorSettings,
    in_all=False,
)
