"""Point-to-point: latency, bandwidth, the patterns people build with send/recv, and their pitfalls."""

from pathlib import Path

from suite.api import ExperimentSpec, collected, later, module_doc

SPEC = ExperimentSpec(
    name="p2p",
    cases=collected(f"{__name__}.cases"),
    # the table reads each pattern's variants from suite/ops/p2p (torch): imported when a table is made
    table=later(f"{__name__}.table:format_tables"),
    guide=module_doc(Path(__file__).with_name("table.py")),
    headline=later(f"{__name__}.table:headline"),
)
