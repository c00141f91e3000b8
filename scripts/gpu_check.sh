#!/usr/bin/env bash
# The whole GPU side in one call, within 8 minutes on one GPU (make gpu-check LOG_DIR=<dir>):
#   1. facts: nvidia-smi, torch / CUDA / NCCL versions
#   2. every test marked gpu (tests/gpu and the rest of tests/), junit XML + log
#   3. a short bench-gpu sweep stored as the reference run (results/reference/<gpu>-x<n>-<date>/),
#      with the command, the commit and the text report beside it
# LOG_DIR gets at most 8 files (the reference run as one tarball), so a remote machine can send
# them back whole. `scripts/gpu_check.sh reference` runs step 3 alone (make reference-gpu).
# Python: the project's venv when there is one, else python3 (a GPU image with torch in it).
# Exit status: 0 when every step passed, else the first failing step's status.
set -u
what=${1:-all}
LOG_DIR=${LOG_DIR:-results/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
REF_MAX_BYTES=${REF_MAX_BYTES:-64M}
REF_ITERS=${REF_ITERS:-20}
TESTS_TIMEOUT_S=${TESTS_TIMEOUT_S:-330}
BENCH_TIMEOUT_S=${BENCH_TIMEOUT_S:-150}
mkdir -p "$LOG_DIR"
status=0
summary="$LOG_DIR/summary.txt"

step() {  # step <name> <timeout_s> <log> <command...>: run, time, record the status
    local name=$1 limit=$2 log=$3 t0 rc
    shift 3
    t0=$(date +%s)
    echo "== $name: $*" | tee -a "$summary"
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    echo "   status $rc in $(( $(date +%s) - t0 )) s (log: $log): $(tail -n 1 "$log")" | tee -a "$summary"
    [ "$rc" -ne 0 ] && [ "$status" -eq 0 ] && status=$rc
    return 0
}

facts() {
    nvidia-smi || echo "nvidia-smi: not found"
    nvidia-smi topo -m 2>/dev/null || true
    "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'gpus', torch.cuda.device_count()); print('nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else None)"
    git rev-parse HEAD 2>/dev/null || true
}

reference() {  # the reference sweep: every experiment on every local GPU
    local n gpu name cmd run
    n=$("$PY" -c "import torch; print(torch.cuda.device_count())") || return 2
    if [ "$n" -lt 1 ]; then echo "error: torch sees no CUDA GPU; a reference run needs one" >&2; return 2; fi
    gpu=$("$PY" -c "import re, torch; print(re.sub(r'[^A-Za-z0-9]+', '-', torch.cuda.get_device_name(0)).strip('-').lower())")
    name=${REF_NAME:-$gpu-x$n-$(date -u +%Y%m%d)}
    run=results/reference/$name
    cmd="$PY -m suite.launch --nproc $n --backend nccl --device cuda --max-bytes $REF_MAX_BYTES --iters $REF_ITERS --results-root results/reference --run-id $name"
    echo "$cmd"
    # shellcheck disable=SC2086  # the command is a word list on purpose
    $cmd || return $?
    { echo "# produced by: $cmd"; echo "# commit: $(git rev-parse HEAD 2>/dev/null)"; } >"$run/COMMAND"
    "$PY" -m suite.report "$run" >"$run/report.txt" || return $?
    rm -f results/reference/latest
    echo "reference report: $run (commit it)"
    tar -czf "$LOG_DIR/reference.tar.gz" -C results/reference "$name"
}

case $what in
    reference) reference; exit $? ;;
    facts) facts; exit $? ;;
    all) ;;
    *) echo "usage: $0 [all|reference|facts]" >&2; exit 2 ;;
esac
export LOG_DIR PY
: >"$summary"
step facts 60 "$LOG_DIR/facts.txt" "$0" facts
step gpu-tests "$TESTS_TIMEOUT_S" "$LOG_DIR/gpu-tests.log" \
    "$PY" -m pytest tests -m gpu -p no:cacheprovider -rA --junitxml "$LOG_DIR/gpu-tests.xml"
step reference "$BENCH_TIMEOUT_S" "$LOG_DIR/reference.log" \
    env REF_MAX_BYTES="${GPU_CHECK_MAX_BYTES:-16M}" REF_ITERS="${GPU_CHECK_ITERS:-10}" "$0" reference
exit "$status"
