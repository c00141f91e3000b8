"""DDP: what gradient synchronisation costs in a real training step, and how DDP hides it."""

from suite.api import ExperimentSpec, collected, later

from . import table
from .settings import DdpSettings

SPEC = ExperimentSpec(
    name="ddp",
    cases=collected(f"{__name__}.cases"),
    settings=DdpSettings,
    table=table.format_tables,
    guide=table.__doc__,
    step_model=later(f"{__name__}.model:step_model"),
    headline=table.headline,
    glance=later(f"{__name__}.report:glance"),
)
