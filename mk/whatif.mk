# What-if replay (suite/postmortem/replay/): a stored run's training steps rebuilt as dependency graphs and
# replayed as recorded, idealised (no straggler) and under the changes asked for. The run needs its profiler
# traces (PROFILE=1): the backend's ops that the journal does not see.
#   make what-if RUN=results/<run> [CASE=text] [WHATIF=rank:1:2,link:0-1:0.5,ranks:4] [PROBE=results/<run at N>]
#     [WHATIF_ONE_MACHINE=1]
#     table + RUN/what-if.json (PROBE: a profiled run of the same cases at N ranks, the compute of ranks:<N>;
#     WHATIF_ONE_MACHINE=1: the run's hosts are containers of one machine, the compose simulation's, whose ranks all
#     share its cores: the compute is priced on that share where they outnumber them)
#   make validate-what-if [WHATIF_RANK=1] [WHATIF_FACTOR=2] [WHATIF_NPROC=3] [WHATIF_STRATEGIES=...]   clean and
#     straggler runs (local ranks; the sharded steps named, by default every one the straggler model takes: a run
#     skips, with its reason, one that its world cannot hold) measured against their what-ifs:
#     results/<WHATIF_ID>-<UTC time>-{clean,slow}, the table in results/<WHATIF_ID>-<time>.md. The straggler is planted in the model (examples/whatif_straggler.py).
#   make validate-what-if WHATIF_COMPOSE=1 [IMAGE=...] [WHATIF_LINK_MBIT=400]   the same on the compose simulation
#     (WHATIF_NPROC nodes of one rank), and a DDP step on 2 nodes at WHATIF_LINK_MBIT against WHATIF_FACTOR times less
CASE          ?=
WHATIF        ?=
PROBE         ?=
WHATIF_ONE_MACHINE ?=
WHATIF_RANK   ?= 1
WHATIF_FACTOR ?= 2
WHATIF_NPROC  ?= 3
WHATIF_ITERS  ?= 20
WHATIF_COMPOSE ?=
WHATIF_LINK_MBIT ?= 400
WHATIF_ID     ?= validate-what-if
WHATIF_MODEL  := examples.whatif_straggler
# every sharded strategy the straggler model takes (it has no tp plan: not tp, sp or 2d)
WHATIF_STRATEGIES ?= ddp,fsdp2,fsdp2_keep,fsdp2_bf16,pp_gpipe,pp_1f1b,pp_interleaved
_whatif_st    = $(subst $(_whatif_comma), ,$(WHATIF_STRATEGIES))
_whatif_comma := ,
_whatif_space := $(subst ,, )
WHATIF_K      = $(subst $(_whatif_space), or ,$(strip $(patsubst %,test_sharded[%],$(_whatif_st))))
WHATIF_RUN_ARGS = EXPERIMENTS=sharded SHARDED_STRATEGIES=$(subst $(_whatif_space),$(_whatif_comma),$(strip $(_whatif_st))) \
  ITERS=$(WHATIF_ITERS) WARMUP=2 PROFILE=1
WHATIF_LINK_ARGS = EXPERIMENTS=ddp DDP_PARAMS=1M ITERS=$(WHATIF_ITERS) WARMUP=2 PROFILE=1
WHATIF_LINK_K := test_ddp and mlp- and ddp]

.PHONY: what-if validate-what-if

what-if: venv  ## RUN= [CASE=] [WHATIF=] [PROBE=] [WHATIF_ONE_MACHINE=1]: a run's training steps replayed, idealised and changed (PROFILE=1 runs)
	@$(PY) -m suite.postmortem.replay "$(RUN)" --case "$(CASE)" --what-if "$(WHATIF)" --probe "$(PROBE)" \
	  $(if $(WHATIF_ONE_MACHINE),--one-machine)

validate-what-if: venv  ## clean and straggler runs against their what-ifs: replay and counterfactual errors
	@case "$(WHATIF_NPROC)" in ''|*[!0-9]*|0|1) echo "error: WHATIF_NPROC must be a whole number of ranks from 2, got '$(WHATIF_NPROC)'" >&2; exit 2;; esac; \
	case "$(WHATIF_RANK)" in ''|*[!0-9]*) bad=1;; *) [ "$(WHATIF_RANK)" -lt "$(WHATIF_NPROC)" ] && bad= || bad=1;; esac; \
	[ -z "$$bad" ] || { echo "error: WHATIF_RANK must be a rank from 0 to $$(( $(WHATIF_NPROC) - 1 )) (WHATIF_NPROC=$(WHATIF_NPROC)), got '$(WHATIF_RANK)'" >&2; exit 2; }; \
	awk -v k="$(WHATIF_FACTOR)" 'BEGIN { exit !(k ~ /^[0-9.]+$$/ && k + 0 >= 1.05 && k + 0 <= 20) }' \
	  || { echo "error: WHATIF_FACTOR must be a number from 1.05 to 20, got '$(WHATIF_FACTOR)'" >&2; exit 2; }; \
	mkdir -p "$(RESULTS)"; base=$(WHATIF_ID)-$$(date -u +%Y%m%dT%H%M%S); \
	one() { id=$$base-$$1; shift; \
	  if [ -n "$(WHATIF_COMPOSE)" ]; then $(MAKE) -s compose-up NPROC_PER_NODE=1 HEARTBEAT_S=60 COMPOSE_PROJECT_NAME=$$(echo $$id | tr A-Z a-z) "$$@"; \
	  else $(MAKE) -s -o $(VENV)/.installed bench-cpu "$$@"; fi > $(RESULTS)/$$id.log 2>&1 \
	    || { echo "error: run $$id failed (log: $(RESULTS)/$$id.log)" >&2; exit 1; }; }; \
	n=$$( [ -n "$(WHATIF_COMPOSE)" ] && echo NNODES || echo NPROC )=$(WHATIF_NPROC); \
	one clean $$n $(WHATIF_RUN_ARGS) RESULTS=$(RESULTS) RUN_ID=$$base-clean K="$(WHATIF_K)" SHARDED_MODEL=$(WHATIF_MODEL):steady || exit 1; \
	one slow $$n $(WHATIF_RUN_ARGS) RESULTS=$(RESULTS) RUN_ID=$$base-slow K="$(WHATIF_K)" \
	  SHARDED_MODEL=$(WHATIF_MODEL):rank$(WHATIF_RANK)x$(WHATIF_FACTOR) || exit 1; \
	link=; if [ -n "$(WHATIF_COMPOSE)" ]; then \
	  shaped=$$(awk -v r=$(WHATIF_LINK_MBIT) -v k=$(WHATIF_FACTOR) 'BEGIN { printf "%g", r / k }'); \
	  for v in base:$(WHATIF_LINK_MBIT) shaped:$$shaped; do \
	    one link-$${v%%:*} NNODES=2 LINK_RATE=$${v#*:}mbit $(WHATIF_LINK_ARGS) RESULTS=$(RESULTS) RUN_ID=$$base-link-$${v%%:*} \
	      K="$(WHATIF_LINK_K)" || exit 1; \
	  done; link="--one-machine --link $(RESULTS)/$$base-link-base,$(RESULTS)/$$base-link-shaped"; fi; \
	$(PY) -m suite.postmortem.replay.validate $(RESULTS)/$$base-clean $(RESULTS)/$$base-slow \
	  --rank $(WHATIF_RANK) --factor $(WHATIF_FACTOR) $$link --out $(RESULTS)/$$base.md
