"""``python -m suite.deploy.k8s``: a run's Kubernetes manifest (suite/deploy/k8s/cli.py)."""

import sys

from suite.deploy.k8s.cli import main

if __name__ == "__main__":  # imported by tests/unit/test_docs_commands.py for its main
    sys.exit(main())
