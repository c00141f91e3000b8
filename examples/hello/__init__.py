"""Hello: the smallest experiment, a folder to copy (``cp -r examples/hello experiments/<name>``)."""

from suite.api import ExperimentSpec, collected

from . import table
from .settings import HelloSettings

SPEC = ExperimentSpec(
    name="hello",  # == the folder's name == the records' "experiment"
    cases=collected(f"{__name__}.cases"),  # imported when the cases are wanted, not when the spec is read
    settings=HelloSettings,  # its knobs: cfg.hello, set by the environment variables in the fields' metadata
    table=table.format_tables,  # its text table (without one: a generic table per op)
    guide=table.__doc__,  # how to read that table: a note above it in the report
)
