#!/usr/bin/env bash
# The closing line of a multi-node run that did not succeed: what its first node to stop non-zero says.
#
#   docker/first-failure.sh <run dir> <node> <status>
#
# Status 8 (EXIT_FINDING, suite/common/failures.py) is not a failure: every probe ran and was correct,
# and the doctor, on node0, found something. Then the doctor's own verdict, from <run dir>/doctor.json
# ("headline": e.g. "weak node node2 (ranks 4, 5): outgoing bandwidth: ..."), is what the run found:
#   # doctor: <headline> (node0 exited with the doctor's status 8; <run dir>/doctor.json)
# Otherwise (or without doctor.json) the node failed, with the cause the ranks wrote in
# <run dir>/failures/rank<r>.json (another node's rank named where it was another's):
#   # first failure: <node> exited with status <status>[: <cause>]
set -uo pipefail
run_dir=$1 node=$2 code=$3
EXIT_FINDING=8
# one string field of a JSON file the suite wrote (its first occurrence)
json_field() {  # json_field <file> <key>
  sed -n "s/.*\"$2\": *\"\(\([^\"\\\\]\|\\\\.\)*\)\".*/\1/p" "$1" | head -n 1
}
if [ "$code" = "$EXIT_FINDING" ] && [ -s "$run_dir/doctor.json" ]; then
  headline=$(json_field "$run_dir/doctor.json" headline)
  if [ -n "$headline" ]; then
    # %b: the JSON escapes of the text (\u00b5 for µ) back to its characters
    printf '# doctor: %b (%s exited with the doctor'"'"'s status %s; %s)\n' "$headline" "$node" "$code" "$run_dir/doctor.json"
    exit 0
  fi
fi
# the run's root cause (suite/common/failures.py cause_note): a rank's own failure, else a heartbeat verdict
# naming the ranks lost, before the socket errors of the ranks left behind
root=$(cd "$(dirname "$0")/.." && pwd)
py="${PY:-$root/.venv/bin/python}"; [ -x "$py" ] || py=python3
cause=$(PYTHONPATH="$root" "$py" -m suite.common.failures cause "$run_dir" "$node")
echo "# first failure: $node exited with status $code${cause:+: $cause}"
