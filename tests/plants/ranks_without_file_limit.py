"""Planted fault, other half: the launcher runs under a small file-size limit (RLIMIT_FSIZE, set by
the test as ``ulimit -f`` would) but the ranks lift it for themselves, so rank 0 writes bench.json
and only the launcher's own rewrite of it (the exit status) hits the limit after the run.
"""

import resource

_, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (_hard, _hard))
