"""Model parallelism: one large linear layer split across ranks, and a pipeline of stages."""

from suite.case import ExperimentSpec, collected

SPEC = ExperimentSpec(
    name="model_parallel",
    cases=collected(f"{__name__}.cases"),
)
