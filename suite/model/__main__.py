"""``python -m suite.model``: the prediction and validation commands (make predict, make validate-predict)."""

import sys

from suite.model.calibrate import main

sys.exit(main())
