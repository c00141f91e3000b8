# Predict at scale (suite/model/): from a stored run's α–β link fits, every collective, a DDP step
# and each sharded strategy's step at RANKS ranks; then check the models on the compose simulation.
#   make predict RUN=results/<run> RANKS=1024 RANKS_PER_NODE=8 [SIZES=1M,64M]   table + RUN/predict.json
#   make validate-predict [VALIDATE_FIT="2 3"] [VALIDATE_CHECK="4 5 6"] [VALIDATE_PPN=1] [VALIDATE_RATE=100mbit]
#     compose runs at every node count (results/<VALIDATE_ID>-<n>n<ppn>p), fit on VALIDATE_FIT, predict and
#     measure VALIDATE_CHECK: per op and size predicted / measured / error, geomean |error| per op; the page
#     results/<VALIDATE_ID>-<ppn>p.html opens on predicted against measured with the error band
#     (VALIDATE_REUSE=1 keeps runs already stored under those names); VALIDATE_DDP=1 (default) also runs the
#     DDP step of a VALIDATE_DDP_PARAMS-parameter MLP (its default DDP, no-op-hook, solo and all_reduce cases)
#     at every node count and checks the step prediction the same way (VALIDATE_DDP= empty leaves it out);
#     VALIDATE_SHARDED=1 (default) also runs the sharded experiment's VALIDATE_SHARDED_STRATEGIES (train step,
#     compute alone, replay) on a model whose width and batch every node count 2..6 divides
#     (VALIDATE_SHARDED_WIDTH/_BATCH/_SEQ/_DEPTH) and checks each strategy's step prediction the same way
#     (VALIDATE_SHARDED= empty leaves it out); VALIDATE_OPS= empty: every collective. The compose nodes share this
#     machine's cores: where a check run's ranks outnumber them, a step's compute is priced from its probe (the
#     compute the step did on all its ranks at once: the step less its collectives replayed alone), not
#     extrapolated from the fit runs (suite/model/contention.py)
RANKS          ?=
RANKS_PER_NODE ?=
SIZES          ?=
VALIDATE_FIT   ?= 2 3
VALIDATE_CHECK ?= 4 5 6
VALIDATE_PPN   ?= 1
VALIDATE_RATE  ?= 100mbit
VALIDATE_MIN   ?= 4K
VALIDATE_MAX   ?= 4M
VALIDATE_STEP  ?= 2
VALIDATE_ITERS ?= 10
VALIDATE_OPS   ?= all_reduce or (all_gather_into_tensor and oop) or (reduce_scatter_tensor and oop) or broadcast or all_to_all_single or barrier
VALIDATE_ID    ?= validate-predict
VALIDATE_REUSE ?=
VALIDATE_DDP   ?= 1
VALIDATE_DDP_PARAMS ?= 500K
VALIDATE_DDP_K := test_ddp and mlp- and (ddp] or solo or no-op or grad_all)
VALIDATE_SHARDED ?= 1
VALIDATE_SHARDED_STRATEGIES ?= ddp,fsdp2,tp
VALIDATE_SHARDED_WIDTH ?= 60
VALIDATE_SHARDED_BATCH ?= 60
VALIDATE_SHARDED_SEQ   ?= 4
VALIDATE_SHARDED_DEPTH ?= 2
_comma := ,

.PHONY: predict validate-predict

predict: venv  ## RUN= RANKS= RANKS_PER_NODE=: every collective, a DDP and each sharded step predicted at scale
	@$(PY) -m suite.model predict "$(RUN)" --ranks "$(RANKS)" --ranks-per-node "$(RANKS_PER_NODE)" $(if $(SIZES),--sizes "$(SIZES)")

validate-predict: venv  ## fit on compose runs of 2-3 nodes, predict and measure 4-6: the error table
	@case "$(VALIDATE_PPN)" in ''|*[!0-9]*|0) echo "error: VALIDATE_PPN must be a positive integer, got '$(VALIDATE_PPN)'" >&2; exit 2;; esac; \
	mkdir -p "$(RESULTS)"; \
	for n in $(VALIDATE_FIT) $(VALIDATE_CHECK); do \
	  id=$(VALIDATE_ID)-$${n}n$(VALIDATE_PPN)p; \
	  if [ -n "$(VALIDATE_REUSE)" ] && [ -f "$(RESULTS)/$$id/bench.json" ]; then echo "# reusing $(RESULTS)/$$id"; continue; fi; \
	  echo "# validate-predict: $$n nodes x $(VALIDATE_PPN) rank(s), LINK_RATE=$(VALIDATE_RATE): run $$id"; \
	  $(MAKE) -s compose-up NNODES=$$n NPROC_PER_NODE=$(VALIDATE_PPN) LINK_RATE=$(VALIDATE_RATE) EXPERIMENTS=collectives$(if $(VALIDATE_DDP),$(_comma)ddp)$(if $(VALIDATE_SHARDED),$(_comma)sharded) \
	    SHARDED_STRATEGIES=$(VALIDATE_SHARDED_STRATEGIES) SHARDED_WIDTH=$(VALIDATE_SHARDED_WIDTH) SHARDED_BATCH=$(VALIDATE_SHARDED_BATCH) \
	    SHARDED_SEQ=$(VALIDATE_SHARDED_SEQ) SHARDED_DEPTH=$(VALIDATE_SHARDED_DEPTH) \
	    DDP_PARAMS=$(VALIDATE_DDP_PARAMS) REDOPS=sum MIN_BYTES=$(VALIDATE_MIN) MAX_BYTES=$(VALIDATE_MAX) STEP_FACTOR=$(VALIDATE_STEP) ITERS=$(VALIDATE_ITERS) \
	    WARMUP=2 RESULTS=$(RESULTS) RUN_ID=$$id K="$(if $(strip $(VALIDATE_OPS)),(test_collective and ($(VALIDATE_OPS))),test_collective)$(if $(VALIDATE_DDP), or ($(VALIDATE_DDP_K)))$(if $(VALIDATE_SHARDED), or test_sharded)" > $(RESULTS)/$$id.log 2>&1 \
	    || { echo "error: compose run $$id failed (log: $(RESULTS)/$$id.log)" >&2; tail -5 $(RESULTS)/$$id.log >&2; exit 1; }; \
	done; \
	fit=$$(for n in $(VALIDATE_FIT); do printf '%s,' $(RESULTS)/$(VALIDATE_ID)-$${n}n$(VALIDATE_PPN)p; done); \
	chk=$$(for n in $(VALIDATE_CHECK); do printf '%s,' $(RESULTS)/$(VALIDATE_ID)-$${n}n$(VALIDATE_PPN)p; done); \
	$(PY) -m suite.model validate --fit "$$fit" --check "$$chk" --one-machine --out $(RESULTS)/$(VALIDATE_ID)-$(VALIDATE_PPN)p.json \
	  && $(PY) -m suite.report validation $(RESULTS)/$(VALIDATE_ID)-$(VALIDATE_PPN)p.json
