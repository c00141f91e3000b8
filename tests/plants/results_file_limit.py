"""Planted fault: rank 0's disk fills up mid-run. After its 3rd case rank 0 lowers its own
file-size limit (RLIMIT_FSIZE, as ``ulimit -f`` does) to the size of the bench.json it has just
written, so the kernel refuses the next, larger rewrite (EFBIG) as a full disk would (ENOSPC).
The other ranks and the launcher keep their limits. tests/e2e/test_failures.py requires the
launcher to name the file and the cause in one line, exit 10, and keep the three measured cases.
"""

import os
import resource
from pathlib import Path

_done = 0


def pytest_runtest_teardown(item):
    global _done
    _done += 1
    if _done != 3 or os.environ.get("RANK") != "0":
        return
    size = (Path(item.config.option.results_dir) / "bench.json").stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
