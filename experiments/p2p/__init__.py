"""Point-to-point: latency, bandwidth, the patterns people build with send/recv, and their pitfalls."""

from suite.case import ExperimentSpec, collected

SPEC = ExperimentSpec(
    name="p2p",
    cases=collected(f"{__name__}.cases"),
)
