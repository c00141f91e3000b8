"""Point-to-point: latency, bandwidth, the patterns people build with send/recv, and their pitfalls."""

from suite.case import ExperimentSpec, collected

from . import table

SPEC = ExperimentSpec(
    name="p2p",
    cases=collected(f"{__name__}.cases"),
    table=table.format_tables,
    guide=table.__doc__,
)
