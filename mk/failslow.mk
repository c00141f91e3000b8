# The fail-slow benchmark (suite/report/failslow/bench.py, docs/doctor.md "The fail-slow bench"): TRIALS short
# DDP training runs with the online watch on, each with one seeded injection (suite/inject/) or none, scored
# after each run against the truth the watch never saw. Its trials write no report of their own (SUITE_REPORT=0),
# print no progress (their output goes to <bench>/trials/<trial>.log) and time the DDP step only (DDP_TIMED_ONLY=1:
# no check against single-process training, no baseline steps; the bench scores detection, not exactness).
#   make failslow-bench TRIALS=8 SEED=1                       # pause and slow, 1 in 4 trials clean
#   make failslow-bench TRIALS=4 FAILSLOW_CLASSES=slow:1,pause::::rest FAILSLOW_DOCTOR=1
#   make failslow-bench FAILSLOW_RESCORE=results/<bench>       # its table and picture again from failslow.json
#   make failslow-bench FAILSLOW_COMPOSE=1 NNODES=2 NPROC_PER_NODE=1 FAILSLOW_CLASSES=slow,egress,nodecpu
#                                           # each trial on the compose simulation (make image), node classes too
# Knobs: FAILSLOW_CLASSES (class specs in INJECT's syntax, comma-separated: fields given are kept, the rest drawn)
#   FAILSLOW_CLEAN (the share of clean trials) FAILSLOW_RUN_S (INJECT_RUN_S of a trial: drawn onsets fall in its
#   20-50%) FAILSLOW_ITERS (training steps per trial, at most) FAILSLOW_BUDGET_S (the steps' time per trial: as
#   many as fit at the first steps' speed) FAILSLOW_DOCTOR (1: the doctor too, with the same injection)
#   FAILSLOW_CYCLE (1: trial i takes the i-th spec, in turn; the spec none is a clean trial) FAILSLOW_CASE (the watched
#   DDP case) FAILSLOW_TIMEOUT_S (a trial's collective timeout)
TRIALS           ?= 8
FAILSLOW_CLASSES ?= pause,slow
FAILSLOW_CLEAN   ?= 0.25
FAILSLOW_RUN_S   ?= 36
FAILSLOW_ITERS   ?= 1000
FAILSLOW_BUDGET_S ?= 25
FAILSLOW_DOCTOR  ?= 0
FAILSLOW_CYCLE   ?= 0
FAILSLOW_RESCORE ?=
FAILSLOW_CASE    ?= mlp-ddp_hook_allreduce
# a trial's collective timeout: a rank slowed to the end of the run slows the record's probes after the steps too
FAILSLOW_TIMEOUT_S ?= 300
FAILSLOW_TRIAL_ARGS = --experiments ddp --iters $(FAILSLOW_ITERS) --warmup 2 --budget-s $(FAILSLOW_BUDGET_S) --timeout-s $(FAILSLOW_TIMEOUT_S) \
  --heartbeat-timeout-s $(HEARTBEAT_S) -- -k $(FAILSLOW_CASE)
# on the compose simulation, the same as its knobs (docker-compose.yml passes them to every node)
FAILSLOW_COMPOSE ?= 0
FAILSLOW_COMPOSE_ARGS = IMAGE=$(IMAGE) EXPERIMENTS=ddp ITERS=$(FAILSLOW_ITERS) WARMUP=2 BUDGET_S=$(FAILSLOW_BUDGET_S) \
  TIMEOUT_S=$(FAILSLOW_TIMEOUT_S) HEARTBEAT_S=$(HEARTBEAT_S) K=$(FAILSLOW_CASE)
FAILSLOW_COMPOSE_DOCTOR_ARGS = IMAGE=$(IMAGE) EXPERIMENTS=doctor ITERS=$(DOCTOR_ITERS) WARMUP=$(DOCTOR_WARMUP) \
  TIMEOUT_S=$(TIMEOUT_S) HEARTBEAT_S=$(HEARTBEAT_S)
_fs_compose = $(filter 1,$(FAILSLOW_COMPOSE))
FAILSLOW_DOCTOR_ARGS = --experiments doctor --iters $(DOCTOR_ITERS) --warmup $(DOCTOR_WARMUP) --timeout-s $(TIMEOUT_S) \
  --heartbeat-timeout-s $(HEARTBEAT_S)

.PHONY: failslow-bench

failslow-bench: venv  ## TRIALS=N SEED=S: the online watch (and the doctor) scored on seeded fail-slow injections
	SUITE_REPORT=0 SUITE_PROGRESS=off DDP_TIMED_ONLY=1 $(PY) -m suite.report.failslow.bench --trials '$(TRIALS)' --seed '$(or $(SEED),0)' \
	  --classes '$(FAILSLOW_CLASSES)' --clean '$(FAILSLOW_CLEAN)' --cycle '$(FAILSLOW_CYCLE)' --run-s '$(FAILSLOW_RUN_S)' \
	  --nproc '$(if $(filter auto,$(NPROC)),2,$(NPROC))' --results-root '$(RESULTS)' $(if $(RUN_ID),--run-id '$(RUN_ID)') \
	  --trial-args '$(if $(_fs_compose),$(FAILSLOW_COMPOSE_ARGS),$(FAILSLOW_TRIAL_ARGS))' \
	  $(if $(filter 1,$(FAILSLOW_DOCTOR)),--doctor-args '$(if $(_fs_compose),$(FAILSLOW_COMPOSE_DOCTOR_ARGS),$(FAILSLOW_DOCTOR_ARGS))') \
	  $(if $(_fs_compose),--compose-nodes '$(NNODES)' --nproc-per-node '$(NPROC_PER_NODE)') \
	  $(if $(FAILSLOW_RESCORE),--rescore '$(FAILSLOW_RESCORE)')
