"""Recovery: a rank dies mid-training; how long until training resumes, and proof of what the recovery kept."""

from suite.api import ExperimentSpec, collected, later

from . import table
from .settings import RecoverySettings

SPEC = ExperimentSpec(
    name="recovery",
    cases=collected(f"{__name__}.cases"),
    settings=RecoverySettings,
    table=table.format_tables,
    guide=table.__doc__,
    check_world=later(f"{__name__}.user:check_world"),  # SHARDED_MODEL, on the host
    in_all=False,  # each case is a training job of its own, with restarts: tens of seconds
)
