"""``python -m suite.launch``: validate, then start the ranks with torchrun (suite/launch/cli.py)."""

import sys

from suite.launch.cli import main

if __name__ == "__main__":  # imported by tests/unit/test_docs_commands.py for its main
    sys.exit(main())
