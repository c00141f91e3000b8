import sys

from suite.postmortem.replay.cli import main

sys.exit(main())
