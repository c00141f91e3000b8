#!/usr/bin/env bash
# `make compose-up`: the whole multi-node simulation end to end, with an honest exit status.
#
# `docker compose up --abort-on-container-exit` returns the code of whichever container stops
# first and stops the rest (a failure can read as 137, a success be cut short), so instead:
# start every node attached (logs stream), wait for all of them to stop, read each exit code,
# always tear the project down (containers and network: leaked networks exhaust the address
# pools), and exit with the first non-zero code in node order (0 when every node succeeded).
#
# Environment: everything docker-compose.yml reads, plus
#   NNODES                 nodes to run; beyond the services in docker-compose.yml, extra ones are
#                          generated (build/compose.nodes.<project>.yml, removed afterwards)
#   COMPOSE_PROJECT_NAME   project (default suite-<pid>): names the containers and the network
#   COMPOSE_FILES          extra -f files, e.g. docker-compose.gpu.yml
#   COMPOSE_TIMEOUT_S      hard limit for the whole run (default 3600); then every node is killed (124)
#   COMPOSE                the compose command (default: `docker compose` if present, else docker-compose)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -z "${COMPOSE:-}" ]; then
  if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"; else COMPOSE=docker-compose; fi
fi
export COMPOSE_PROJECT_NAME="${COMPOSE_PROJECT_NAME:-suite-$$}"
export NNODES="${NNODES:-3}"
export RESULTS_DIR="${RESULTS_DIR:-$PWD/results}"
mkdir -p "$RESULTS_DIR"
if [ -z "${RUN_ID:-}" ]; then
  RUN_ID="compose-$(date -u +%Y%m%d-%H%M%S)"
fi
export RUN_ID

files=(-f docker-compose.yml)
nodes_file="build/compose.nodes.$COMPOSE_PROJECT_NAME.yml"
declared=$(grep -cE '^  node[0-9]+:' docker-compose.yml)
if [ "$NNODES" -gt "$declared" ]; then
  # more nodes than declared: each extra one extends node1 with its own rank and hostname
  mkdir -p build
  {
    echo 'version: "2.4"'
    echo "services:"
    for ((i = declared; i < NNODES; i++)); do
      printf '  node%d:\n    extends: {file: %s, service: node1}\n' "$i" "$PWD/docker-compose.yml"
      printf '    hostname: node%d\n    environment: {NODE_RANK: "%d"}\n    networks: [simnet]\n' "$i" "$i"
    done
  } > "$nodes_file"
  files+=(-f "$nodes_file")
fi
for f in ${COMPOSE_FILES:-}; do files+=(-f "$f"); done
services=()
for ((i = 0; i < NNODES; i++)); do services+=("node$i"); done

dc() { $COMPOSE "${files[@]}" "$@"; }
teardown() { dc down --volumes --remove-orphans --timeout 5 >/dev/null 2>&1; rm -f "$nodes_file"; }
trap 'teardown' EXIT
trap 'echo "interrupted: stopping every node"; teardown; exit 130' INT TERM

echo "# compose project $COMPOSE_PROJECT_NAME: $NNODES node(s) x ${NPROC_PER_NODE:-2} rank(s), run $RUN_ID, results in $RESULTS_DIR"
t0=$(date +%s)
# attached `up` (no --abort-on-container-exit) returns once every container has stopped
timeout --foreground "${COMPOSE_TIMEOUT_S:-3600}" $COMPOSE "${files[@]}" up --no-build --no-color "${services[@]}"
up_rc=$?
rc=0
for s in "${services[@]}"; do
  id=$(dc ps -q "$s" 2>/dev/null)
  if [ -z "$id" ]; then
    code=125; state="never started"
  else
    [ "$up_rc" = 124 ] && docker kill "$id" >/dev/null 2>&1
    code=$(docker inspect -f '{{.State.ExitCode}}' "$id" 2>/dev/null || echo 125)
    state=$(docker inspect -f '{{.State.Status}}' "$id" 2>/dev/null || echo gone)
  fi
  echo "# $s: exit $code ($state)"
  if [ "$rc" = 0 ] && [ "$code" != 0 ]; then rc=$code; fi
done
if [ "$up_rc" = 124 ]; then
  echo "# compose run exceeded COMPOSE_TIMEOUT_S=${COMPOSE_TIMEOUT_S:-3600} s: nodes killed"
  rc=124
elif [ "$up_rc" != 0 ] && [ "$rc" = 0 ]; then
  rc=$up_rc
fi
echo "# compose run finished in $(( $(date +%s) - t0 )) s, status $rc; results: $RESULTS_DIR/$RUN_ID/bench.json"
exit "$rc"
