"""``python -m suite.model``: the prediction and validation commands (make predict, make validate-predict)."""

import sys

from suite.model.cli import main

sys.exit(main())
