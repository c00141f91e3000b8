#!/bin/sh
# One node of the compose simulation: `python -m suite.launch` with this node's place in the job.
# Every knob comes from the environment (docker-compose.yml passes them through; same names as the
# Makefile's): NNODES NODE_RANK NPROC_PER_NODE MASTER_ADDR MASTER_PORT EXPERIMENTS MIN_BYTES
# MAX_BYTES STEP_FACTOR DTYPES REDOPS ITERS WARMUP TIMING PIPELINE_DEPTH PRECISION MAX_TIME_S
# BUDGET_S TIMEOUT_S HEARTBEAT_S TABLES BACKEND DEVICE RUN_ID K PYTEST_ARGS. Only node 0's rank 0 writes $RESULTS/<run-id>/.
set -eu
NNODES="${NNODES:-3}"
NODE_RANK="${NODE_RANK:-0}"
MASTER_ADDR="${MASTER_ADDR:-node0}"
if [ "$NODE_RANK" -ge "$NNODES" ]; then
  # the compose file declares more node services than this run uses
  echo "node $NODE_RANK: not part of a $NNODES-node run; nothing to do"
  exit 0
fi
# SUITE_CHECK_ONLY=1 (docker/compose-run.sh, before any node starts): validate every knob exactly as
# the launcher would, print its one-line verdict and exit (0, or 2 with the message).
check=""
if [ "${SUITE_CHECK_ONLY:-0}" = 1 ]; then check=--check; fi
# Node 0's name resolves once its container exists; give it the rendezvous timeout to appear
# instead of failing the preflight because this container started first.
if [ -z "$check" ]; then
  "$(dirname "$0")/await-host.sh" "$MASTER_ADDR" "${RDZV_TIMEOUT_S:-120}" || exit $?
fi

if [ "${BACKEND:-}" = mpi ] && [ -z "${MPI_HOSTS:-}" ]; then
  # node 0's mpiexec starts the ranks of every node over ssh: the compose nodes' hostnames, in NODE_RANK order
  MPI_HOSTS=$(seq -s, -f 'node%g' 0 $((NNODES - 1)))
  export MPI_HOSTS
fi

results_root="${RESULTS:-/results}"
if [ -z "${RUN_ID:-}" ] && [ "$NODE_RANK" != 0 ]; then
  # Every node's launcher creates <results>/<run-id>; without a shared RUN_ID (make compose-up
  # sets one) each would pick its own timestamp, so only node 0 uses the shared directory.
  results_root=/tmp/suite-results
fi
set -- python -m suite.launch --nnodes "$NNODES" --node-rank "$NODE_RANK" --nproc "${NPROC_PER_NODE:-2}" \
  --master-addr "$MASTER_ADDR" --master-port "${MASTER_PORT:-29500}" --rdzv-timeout-s "${RDZV_TIMEOUT_S:-120}" \
  --backend "${BACKEND:-gloo}" --device "${DEVICE:-cpu}" --experiments "${EXPERIMENTS:-all}" \
  --results-root "$results_root" $check
# optional knobs: passed only when set, so the harness's own defaults apply otherwise
for pair in min-bytes:MIN_BYTES max-bytes:MAX_BYTES step-factor:STEP_FACTOR dtypes:DTYPES redops:REDOPS \
            iters:ITERS warmup:WARMUP timing:TIMING pipeline-depth:PIPELINE_DEPTH precision-pct:PRECISION \
            max-time-s:MAX_TIME_S budget-s:BUDGET_S timeout-s:TIMEOUT_S heartbeat-timeout-s:HEARTBEAT_S run-id:RUN_ID root:ROOT \
            tables:TABLES; do
  flag="${pair%%:*}"; var="${pair#*:}"
  eval "val=\${$var:-}"
  if [ -n "$val" ]; then set -- "$@" "--$flag" "$val"; fi
done
set -- "$@" --
if [ -n "${K:-}" ]; then set -- "$@" -k "$K"; fi
# PYTEST_ARGS is split on spaces (no quoting inside it); use K for -k expressions.
# shellcheck disable=SC2086
set -- "$@" ${PYTEST_ARGS:-}
echo "node $NODE_RANK ($(hostname)): $*"
exec "$@"
