# The ETTR model (suite/model/ettr.py; docs/recovery.md, "ETTR: the model"): offline, no ranks start.
#   make ettr ETTR_CKPT_S=30 ETTR_RESTART_S=300 [ETTR_ASYNC_CKPT_S=3] [ETTR_LIVE_S=60 ETTR_STEP_S=2 [ETTR_LIVE_OVERHEAD_S=0.1]] [ETTR_SCALE=1024=7.9h,...]
#     per scale and strategy: Young's, Daly's and the best checkpoint interval, the ETTR there, Meta's
#     estimate and the gap to ByteRobust's 97% (costs are the command's parameters, held flat in scale)
#   make ettr-check [ETTR_SEED=1]   the closed forms against a seeded Monte-Carlo of Poisson failures
#   make ettr-validate ETTR_RECORDS=<file.json>   measured ETTR per run record against the model (the 10% bar)
#   make ettr-measure [ETTR_MTBF=60,120,240 ETTR_RUN_S=240 ETTR_REPEATS=1 ETTR_RECORDS=results/ettr-runs.json
#                      ETTR_WORKDIR=<folder: checkpoints, events, the fault-free run reused>]
#     long elastic runs (2 ranks, steps padded to 0.1 s) under Poisson failures at each MTBF (seconds of
#     training), their records written to ETTR_RECORDS, then ettr-validate on them
ETTR_CKPT_S       ?=
ETTR_RESTART_S    ?=
ETTR_ASYNC_CKPT_S ?=
ETTR_LIVE_S       ?=
ETTR_STEP_S       ?=
ETTR_LIVE_OVERHEAD_S ?=
ETTR_SCALE        ?= 1024=7.9h,16384=1.8h
ETTR_SEED         ?= 1
ETTR_RECORDS      ?=
ETTR_MTBF         ?= 60,120,240
ETTR_RUN_S        ?= 240
ETTR_REPEATS      ?= 1
ETTR_WORKDIR      ?=

.PHONY: ettr ettr-check ettr-validate ettr-measure

ettr: venv  ## ETTR_CKPT_S= ETTR_RESTART_S=: best checkpoint interval and ETTR per strategy at 1,024 and 16,384 ranks
	@$(PY) -m suite.model.ettr_cli table --ckpt-s "$(ETTR_CKPT_S)" --restart-s "$(ETTR_RESTART_S)" --scale "$(ETTR_SCALE)" \
	  $(if $(ETTR_ASYNC_CKPT_S),--async-ckpt-s "$(ETTR_ASYNC_CKPT_S)") $(if $(ETTR_LIVE_S),--live-s "$(ETTR_LIVE_S)") \
	  $(if $(ETTR_STEP_S),--step-s "$(ETTR_STEP_S)") $(if $(ETTR_LIVE_OVERHEAD_S),--live-overhead-s "$(ETTR_LIVE_OVERHEAD_S)")

ettr-check: venv  ## the ETTR closed forms against a seeded Monte-Carlo of Poisson failures at four rates
	@$(PY) -m suite.model.ettr_cli check --seed "$(ETTR_SEED)"

ettr-validate: venv  ## ETTR_RECORDS=<file.json>: measured ETTR per recovery run against the model, the 10% bar
	@$(PY) -m suite.model.ettr_cli validate "$(ETTR_RECORDS)"

ettr-measure: venv  ## ETTR_MTBF=60,120,240: long elastic runs under Poisson failures, measured ETTR against the model
	@$(PY) -m experiments.recovery.ettr_runs --mtbf "$(ETTR_MTBF)" --run-s "$(ETTR_RUN_S)" --repeats "$(ETTR_REPEATS)" \
	  $(if $(ETTR_WORKDIR),--workdir "$(ETTR_WORKDIR)") --out "$(or $(ETTR_RECORDS),results/ettr-runs.json)"
	@$(PY) -m suite.model.ettr_cli validate "$(or $(ETTR_RECORDS),results/ettr-runs.json)"
