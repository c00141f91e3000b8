#!/usr/bin/env bash
# `make compose-up`: the whole multi-node simulation end to end, with an honest exit status.
#
# `docker compose up --abort-on-container-exit` returns the code of whichever container stops
# first and stops the rest (a failure can read as 137, a success be cut short), so instead:
# start every node attached (logs stream) and supervise them: once any node has failed (exited
# non-zero), every other node gets COMPOSE_GRACE_S to stop on its own (the healthy ones do, within
# HEARTBEAT_S of losing a peer) and is then killed, whatever state it is in (running, frozen,
# paused). Read each exit code, always tear the project down (containers and network: leaked
# networks exhaust the address pools), and exit with the first failure's code (0 when every node
# succeeded), naming the node and the cause in the last lines.
#
# Environment: everything docker-compose.yml reads, plus
#   NNODES                 nodes to run; beyond the services in docker-compose.yml, extra ones are
#                          generated (build/compose.nodes.<project>.yml, removed afterwards)
#   COMPOSE_PROJECT_NAME   project (default suite-<pid>): names the containers and the network
#   COMPOSE_FILES          extra -f files, e.g. docker-compose.gpu.yml
#   COMPOSE_TIMEOUT_S      hard limit for the whole run (default 3600); then every node is killed (124)
#   COMPOSE_GRACE_S        after the first node failure, how long the others may take to stop before
#                          they are killed (default 30)
#   COMPOSE                the compose command (default: `docker compose` if present, else docker-compose)
#   NODE_CPUS              per-node CPU limits, e.g. node1=0.5[,node2=1.5]: that container is created with
#                          `cpus:` (a cgroup quota; the results record it per host as cgroup_cpus)
#   LINK_RATES             per-node egress rates, e.g. node2=50mbit (docker/link.sh applies them)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
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
# the recovery experiment's folder: one every node sees (the results volume), its elastic job spanning the nodes
recovery_run=0  # whether the run's experiments name recovery (EXPERIMENTS=all does not: it is run by name)
case ",${EXPERIMENTS:-all}," in
  *,recovery,*) recovery_run=1; export RECOVERY_DIR="${RECOVERY_DIR:-/results/$RUN_ID/recovery}" ;;
esac
rdir="${RECOVERY_DIR:-}"
recovery_host_dir="$RESULTS_DIR/${rdir#/results/}"  # the host's side of it (the watcher of its disconnects)

# per-node knobs: checked here, before any container exists (node names, rates, CPU counts)
check_per_node() {  # check_per_node <knob> <value> <regex of a value> <example>
  local entry name val
  for entry in $(echo "$2" | tr ',' ' '); do
    name=${entry%%=*} val=${entry#*=}
    if [ "$name" = "$entry" ] || ! [[ $name =~ ^node[0-9]+$ ]] || [ "${name#node}" -ge "$NNODES" ]; then
      echo "error: $1 entry '$entry' must be node<i>=<value> with i < NNODES=$NNODES (e.g. $1=$4)" >&2; exit 2
    fi
    if ! [[ $val =~ $3 ]]; then
      echo "error: $1 entry '$entry': '$val' is not valid (e.g. $1=$4)" >&2; exit 2
    fi
  done
}
check_per_node LINK_RATES "${LINK_RATES:-}" '^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$' node2=50mbit
check_per_node NODE_CPUS "${NODE_CPUS:-}" '^([0-9]+(\.[0-9]*)?|\.[0-9]+)$' node1=0.5
for entry in $(echo "${NODE_CPUS:-}" | tr ',' ' '); do
  if ! awk -v c="${entry#*=}" -v n="$(nproc)" 'BEGIN { exit !(c > 0 && c <= n) }'; then
    echo "error: NODE_CPUS entry '$entry': the CPU count must be > 0 and at most this host's $(nproc)" >&2; exit 2
  fi
done

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
cpus_file="build/compose.cpus.$COMPOSE_PROJECT_NAME.yml"
if [ -n "${NODE_CPUS:-}" ]; then
  mkdir -p build
  {
    echo 'version: "2.4"'
    echo "services:"
    for entry in $(echo "$NODE_CPUS" | tr ',' ' '); do printf '  %s:\n    cpus: %s\n' "${entry%%=*}" "${entry#*=}"; done
  } > "$cpus_file"
  files+=(-f "$cpus_file")
fi
for f in ${COMPOSE_FILES:-}; do files+=(-f "$f"); done
services=()
for ((i = 0; i < NNODES; i++)); do services+=("node$i"); done

dc() { $COMPOSE "${files[@]}" "$@"; }
# shellcheck disable=SC2329  # called from the traps below
teardown() { dc down --volumes --remove-orphans --timeout 5 >/dev/null 2>&1; rm -f "$nodes_file" "$cpus_file"; }
trap 'teardown' EXIT
trap 'echo "interrupted: stopping every node"; teardown; exit 130' INT TERM

# Every knob validated before any node starts, by the launcher itself (the same messages as a local
# run), in a throwaway node0 container with the run's environment: a bad knob fails here with exit 2.
check_out=$(dc run --rm --no-deps -T -e SUITE_CHECK_ONLY=1 node0 2>&1); check_rc=$?
if [ "$check_rc" != 0 ]; then
  echo "$check_out" | grep -E "^(error|link: error)" >&2 || echo "$check_out" | tail -n 5 >&2
  echo "# the knobs were refused before any node started (exit $check_rc)" >&2
  exit "$check_rc"
fi

echo "# compose project $COMPOSE_PROJECT_NAME: $NNODES node(s) x ${NPROC_PER_NODE:-2} rank(s), run $RUN_ID, results in $RESULTS_DIR"
t0=$(date +%s)
limit=${COMPOSE_TIMEOUT_S:-3600}
grace=${COMPOSE_GRACE_S:-30}
# attached `up` (no --abort-on-container-exit) streams every node's log and returns once every
# container has stopped; the loop below makes sure they all do.
$COMPOSE "${files[@]}" up --no-build --no-color "${services[@]}" &
up_pid=$!
recovery_pid=""
if [ "$recovery_run" = 1 ] && [[ ${RECOVERY_FAULTS:-} == *disconnect* ]]; then
  # the recovery job's disconnects are struck from here, through docker (experiments/recovery/disconnect.py); a
  # run without the recovery experiment has no job to strike, whatever RECOVERY_FAULTS says
  py="${PY:-.venv/bin/python}"; [ -x "$py" ] || py=python3
  "$py" -m experiments.recovery.disconnect "$COMPOSE_PROJECT_NAME" "$NNODES" --watch "$recovery_host_dir" &
  recovery_pid=$!
fi
inject_pid=""
if [ -n "${INJECT:-}" ]; then
  # a node's class (egress rate, CPU quota) is applied from here, through docker (suite/inject/host.py)
  py="${PY:-.venv/bin/python}"; [ -x "$py" ] || py=python3
  "$py" -m suite.inject.host "$RESULTS_DIR/$RUN_ID" "$COMPOSE_PROJECT_NAME" "${NPROC_PER_NODE:-2}" "$NNODES" &
  inject_pid=$!
fi
declare -A cid=()
first="" first_code="" first_t="" timed_out=0 killed=()
state_of() { docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$1" 2>/dev/null || echo "gone 125"; }
kill_node() {  # kill_node <service> <why>: SIGKILL, whatever its state (a paused one unpaused if kill refuses)
  local st
  st=$(state_of "${cid[$1]}")
  case ${st%% *} in
    running|paused|restarting)  # still up when the decision was made: it is killed, whatever happens next
      killed+=("$1")
      echo "# $1: killing it (${st%% *}; $2)"
      docker kill "${cid[$1]}" >/dev/null 2>&1 \
        || { docker unpause "${cid[$1]}" >/dev/null 2>&1; docker kill "${cid[$1]}" >/dev/null 2>&1; } ;;
  esac
}
while kill -0 "$up_pid" 2>/dev/null; do
  sleep 1
  now=$(date +%s)
  for s in "${services[@]}"; do
    [ -n "${cid[$s]:-}" ] || cid[$s]=$(dc ps -q "$s" 2>/dev/null)
    [ -n "${cid[$s]}" ] || continue
    read -r st code <<<"$(state_of "${cid[$s]}")"
    if [ -z "$first" ] && [ "$st" = exited ] && [ "$code" != 0 ]; then
      first=$s first_code=$code first_t=$now
      what="failed (exit $code)"
      [ "$code" = 8 ] && what="exited with status 8 (the doctor's finding, not a failure)"
      echo "# $s $what; the other nodes have ${grace} s (COMPOSE_GRACE_S) to stop"
    fi
  done
  if [ -n "$first" ] && [ $((now - first_t)) -ge "$grace" ]; then
    for s in "${services[@]}"; do
      [ -n "${cid[$s]:-}" ] && kill_node "$s" "still up ${grace} s after $first failed"
    done
    first_t=$((now + 3600))  # killed once; `up` returns as soon as docker has reaped them
  fi
  if [ $((now - t0)) -ge "$limit" ] && [ "$timed_out" = 0 ]; then
    timed_out=1
    for s in "${services[@]}"; do
      [ -n "${cid[$s]:-}" ] && kill_node "$s" "COMPOSE_TIMEOUT_S=$limit s reached"
    done
  elif [ "$timed_out" = 1 ] && [ $((now - t0)) -ge $((limit + 30)) ]; then
    kill "$up_pid" 2>/dev/null  # the nodes are dead; a compose client that still waits is stopped too
  fi
done
wait "$up_pid"
up_rc=$?
if [ -n "$inject_pid" ]; then kill -TERM "$inject_pid" 2>/dev/null; wait "$inject_pid"; fi
if [ -n "$recovery_pid" ]; then kill -TERM "$recovery_pid" 2>/dev/null; wait "$recovery_pid"; fi
rc=0
for s in "${services[@]}"; do
  id=${cid[$s]:-$(dc ps -q "$s" 2>/dev/null)}
  if [ -z "$id" ]; then
    code=125; state="never started"
  else
    read -r state code <<<"$(state_of "$id")"
  fi
  case " ${killed[*]} " in *" $s "*) state="$state, killed by the supervisor" ;; esac
  echo "# $s: exit $code ($state)"
  if [ "$rc" = 0 ] && [ "$code" != 0 ] && [ -z "$first" ]; then rc=$code; fi
done
if [ -n "$first" ]; then
  rc=$first_code
  # the cause as the first failing node's own ranks wrote it, or the doctor's finding (status 8)
  docker/first-failure.sh "$RESULTS_DIR/$RUN_ID" "$first" "$first_code"
fi
# the launchers' hang diagnosis (suite/postmortem/hang.py render: the verdict is the one "# " line without a label)
hang_txt="$RESULTS_DIR/$RUN_ID/failures/hang.txt"
if [ -s "$hang_txt" ]; then
  verdict=$(grep -v -e '^#   ' -e '^# hang diagnosis' -e '^# flight recorder' "$hang_txt" | head -n 1)
  [ -n "$verdict" ] && echo "# hang diagnosis: ${verdict#\# } ($hang_txt)"
fi
if [ "$timed_out" = 1 ]; then
  echo "# compose run exceeded COMPOSE_TIMEOUT_S=$limit s: nodes killed"
  rc=124
elif [ "$up_rc" != 0 ] && [ "$rc" = 0 ]; then
  rc=$up_rc
fi
echo "# compose run finished in $(( $(date +%s) - t0 )) s, status $rc; results: $RESULTS_DIR/$RUN_ID/bench.json"
exit "$rc"
