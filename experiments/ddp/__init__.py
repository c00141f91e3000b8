"""DDP: what gradient synchronisation costs in a real training step, and how DDP hides it."""

from suite.case import ExperimentSpec, collected

SPEC = ExperimentSpec(
    name="ddp",
    cases=collected(f"{__name__}.cases"),
)
