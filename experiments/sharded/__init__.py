"""Sharded training: FSDP2, tensor and sequence parallel and a 2-D mesh, each checked against one process,
its collectives inventoried beside theory, its step timed."""

from suite.api import ExperimentSpec, collected, later

from . import table
from .settings import ShardedSettings

SPEC = ExperimentSpec(
    name="sharded",
    cases=collected(f"{__name__}.cases"),
    settings=ShardedSettings,
    table=table.format_tables,
    guide=table.__doc__,
    report_section=later(f"{__name__}.report:section"),
    glance=later(f"{__name__}.report:glance"),
    check_world=later(f"{__name__}.user_model:check_world"),  # SHARDED_MODEL, on the host
    step_model=later(f"{__name__}.model:step_model"),
    headline=table.headline,
)
