"""``python -m suite.report``: tables, reports and comparisons of stored runs (suite/report/cli.py)."""

import sys

from suite.report.cli import main

if __name__ == "__main__":  # imported by tests/unit/test_docs_commands.py for its main
    sys.exit(main())
