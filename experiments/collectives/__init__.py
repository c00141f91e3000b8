"""Collectives: time, bandwidth and exact correctness of every torch.distributed collective."""

from suite.api import ExperimentSpec, collected

from . import table
from .settings import CollectivesSettings

SPEC = ExperimentSpec(
    name="collectives",
    cases=collected(f"{__name__}.cases"),
    settings=CollectivesSettings,
    table=table.format_tables,
    report_order=-1,
    library_collectives=True,
    link_points=lambda rec: True,  # every record times one collective of the library
)
