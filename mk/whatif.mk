# What-if replay (suite/postmortem/replay/): a stored run's training steps rebuilt as dependency graphs and
# replayed as recorded, idealised (no straggler) and under the changes asked for. The run needs its profiler
# traces (PROFILE=1): the backend's ops that the journal does not see.
#   make what-if RUN=results/<run> [CASE=text] [WHATIF=rank:1:2,link:0-1:0.5]   table + RUN/what-if.json
#   make validate-what-if [WHATIF_RANK=1] [WHATIF_FACTOR=2]   clean and straggler runs (local, 2 ranks), measured
#     against their what-ifs: results/<WHATIF_ID>-<UTC time>-{clean,slow}, the table in results/<WHATIF_ID>-<time>.md
CASE          ?=
WHATIF        ?=
WHATIF_RANK   ?= 1
WHATIF_FACTOR ?= 2
WHATIF_ID     ?= validate-what-if
WHATIF_K      := (test_ddp and mlp- and ddp]) or test_sharded[fsdp2] or test_sharded[pp_gpipe]
WHATIF_RUN_ARGS := NPROC=2 EXPERIMENTS=ddp,sharded DDP_PARAMS=1M SHARDED_STRATEGIES=fsdp2,pp_gpipe SHARDED_WIDTH=64 \
  SHARDED_BATCH=16 SHARDED_DEPTH=2 SHARDED_SEQ=4 ITERS=30 WARMUP=2 PROFILE=1

.PHONY: what-if validate-what-if

what-if: venv  ## RUN= [CASE=] [WHATIF=]: a run's training steps replayed, idealised and changed (PROFILE=1 runs)
	@$(PY) -m suite.postmortem.replay "$(RUN)" --case "$(CASE)" --what-if "$(WHATIF)"

validate-what-if: venv  ## clean and straggler runs against their what-ifs: replay and counterfactual errors
	@case "$(WHATIF_RANK)" in 0|1) ;; *) echo "error: WHATIF_RANK must be 0 or 1 (the check runs 2 ranks), got '$(WHATIF_RANK)'" >&2; exit 2;; esac; \
	awk -v k="$(WHATIF_FACTOR)" 'BEGIN { exit !(k ~ /^[0-9.]+$$/ && k + 0 >= 1.05 && k + 0 <= 20) }' \
	  || { echo "error: WHATIF_FACTOR must be a number from 1.05 to 20 (the slow injection's range), got '$(WHATIF_FACTOR)'" >&2; exit 2; }; \
	mkdir -p "$(RESULTS)"; base=$(WHATIF_ID)-$$(date -u +%Y%m%dT%H%M%S); \
	for v in clean slow; do \
	  $(MAKE) -s -o $(VENV)/.installed bench-cpu $(WHATIF_RUN_ARGS) RESULTS=$(RESULTS) RUN_ID=$$base-$$v K="$(WHATIF_K)" \
	    $$( [ $$v = slow ] && echo INJECT=slow:$(WHATIF_RANK):0:$(WHATIF_FACTOR):rest ) > $(RESULTS)/$$base-$$v.log 2>&1 \
	    || { echo "error: run $$base-$$v failed (log: $(RESULTS)/$$base-$$v.log)" >&2; exit 1; }; \
	done; \
	$(PY) -m suite.postmortem.replay.validate $(RESULTS)/$$base-clean $(RESULTS)/$$base-slow \
	  --rank $(WHATIF_RANK) --factor $(WHATIF_FACTOR) --out $(RESULTS)/$$base.md
