#!/usr/bin/env bash
# The closing line of a multi-node run that did not succeed: what its first node to stop non-zero says.
#
#   docker/first-failure.sh <run dir> <node> <status>
#
# Status 8 (EXIT_FINDING) with <run dir>/doctor.json is the doctor's finding, not a failure:
#   # doctor: <headline> (node0 exited with the doctor's status 8; <run dir>/doctor.json)
# Otherwise the node failed, with the run's root cause from <run dir>/failures/rank<r>.json:
#   # first failure: <node> exited with status <status>[: <cause>]
# Both are suite/common/failures.py closing_line, on the host's Python (the suite's .venv where it has one).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py="${PY:-$root/.venv/bin/python}"; [ -x "$py" ] || py=python3
PYTHONPATH="$root" exec "$py" -m suite.common.failures closing "$@"
