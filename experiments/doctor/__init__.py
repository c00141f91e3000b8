"""The doctor: is anything wrong, and where (a health check, not a benchmark: ``make doctor``)."""

from suite.api import ExperimentSpec, collected, later

from .settings import DoctorSettings

SPEC = ExperimentSpec(
    name="doctor",
    cases=collected(f"{__name__}.cases"),
    settings=DoctorSettings,
    in_all=False,
    min_world_size=2,
    needs_ranks_because="the doctor compares ranks and links",
    report_order=-2,
    table=later(f"{__name__}.table:format_tables"),
    report_section=later(f"{__name__}.report:section"),
    summary=later(f"{__name__}.report:summary"),
    glance=later(f"{__name__}.picture:glance"),
    verdict=later(f"{__name__}.verdict:run_doctor"),
    headline=later(f"{__name__}.report:headline"),
)
