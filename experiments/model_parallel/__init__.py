"""Model parallelism: one large linear layer split across ranks, and a pipeline of stages."""

from suite.api import ExperimentSpec, collected

from . import table
from .settings import ModelParallelSettings

SPEC = ExperimentSpec(
    name="model_parallel",
    cases=collected(f"{__name__}.cases"),
    settings=ModelParallelSettings,
    table=table.format_tables,
    guide=table.__doc__,
    headline=table.headline,
)
