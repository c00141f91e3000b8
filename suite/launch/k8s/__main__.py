"""``python -m suite.launch.k8s``: a run's Kubernetes manifest (suite/launch/k8s/cli.py)."""

import sys

from suite.launch.k8s.cli import main

if __name__ == "__main__":  # imported by tests/unit/test_docs_commands.py for its main
    sys.exit(main())
