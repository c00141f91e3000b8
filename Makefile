# The front door. Knobs are make variables: `make bench-cpu NPROC=2 MAX_BYTES=64M`.
PYTHON      ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python

NPROC       ?= 4
EXPERIMENTS ?= all
MIN_BYTES   ?= 1K
MAX_BYTES   ?= 1M
STEP_FACTOR ?= 4
DTYPES      ?= float32
REDOPS      ?= sum,avg,product,min,max
ITERS       ?= 20
WARMUP      ?= 5
TIMING      ?= blocking
PIPELINE_DEPTH ?= 8
ROOT        ?= 0
PRECISION   ?= 0
MAX_TIME_S  ?= 10
TIMEOUT_S   ?= 60
HEARTBEAT_S ?= 15
DEBUG       ?=
RESULTS     ?= results
RUN_ID      ?=
REPEAT      ?= 1
K           ?=
PYTEST_ARGS ?=

SUITE_ARGS = --experiments $(EXPERIMENTS) --min-bytes $(MIN_BYTES) --max-bytes $(MAX_BYTES) \
  --step-factor $(STEP_FACTOR) --dtypes $(DTYPES) --redops $(REDOPS) --iters $(ITERS) --warmup $(WARMUP) \
  --timing $(TIMING) --pipeline-depth $(PIPELINE_DEPTH) --root $(ROOT) --precision-pct $(PRECISION) --max-time-s $(MAX_TIME_S) --timeout-s $(TIMEOUT_S) \
  --heartbeat-timeout-s $(HEARTBEAT_S) --results-root $(RESULTS) $(if $(RUN_ID),--run-id $(RUN_ID)) \
  $(if $(DEBUG),--debug)
PASSTHROUGH = -- $(if $(K),-k "$(K)") $(PYTEST_ARGS)

.PHONY: help venv bench-cpu bench-gpu test test-cpu test-fast soak clean

# Feature areas add their targets in mk/*.mk (image, compose, report, slurm, ...).
-include $(sort $(wildcard mk/*.mk))

help:
	@echo "make bench-cpu   run every experiment on NPROC local ranks (Gloo, CPU)"
	@echo "make bench-gpu   run every experiment on all local GPUs (NCCL)"
	@echo "make test        every test of the project (what CI runs)"
	@echo "make test-cpu    the tests that need no Docker"
	@echo "make test-fast   the unit tier (tests/unit), in seconds"
	@echo "make soak        TIER=dist N=20: a test tier N times, failures per test"
	@echo "make report      HTML/Markdown report of RUN (default results/latest)"
	@echo "make bench-cpu REPEAT=k  k runs <id>-r1..rk (a side of a comparison with between-run variation)"
	@echo "make compare     BASE=<run> NEW=<run>: per-case verdicts, non-zero exit on a regression"
	@echo "                 (a side: a run, runs joined by commas, or results/<id> for its REPEAT runs)"
	@echo "make image       build the Docker image (local base + wheelhouse where no registry is reachable)"
	@echo "make compose-up  the 3-node docker compose simulation, results in ./results"
	@echo "make test-compose  the Docker tests"
	@echo "make gpu-check   LOG_DIR=dir: the whole GPU side in one call (tests + short reference sweep)"
	@echo "make bench-slurm / test-slurm / test-gpu / reference-gpu / bench-ddp / ddp-example / teardown-rate (see README)"

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

# REPEAT=k: k runs one after another, run ids <RUN_ID or a UTC timestamp>-r1 .. -rk; `make compare`
# takes results/<id> for all of them (a side of several runs: between-run variation is measured).
bench-cpu: venv
	@case "$(REPEAT)" in ''|*[!0-9]*|0*) echo "error: REPEAT must be a positive integer, got '$(REPEAT)'" >&2; exit 2;; esac; \
	if [ "$(REPEAT)" = 1 ]; then set -x; \
	  $(PY) -m suite.launch --nproc $(NPROC) --backend gloo --device cpu $(SUITE_ARGS) $(PASSTHROUGH); \
	else id=$(or $(RUN_ID),$$(date -u +%Y%m%d-%H%M%S)); for i in $$(seq $(REPEAT)); do \
	  echo "# repeat $$i of $(REPEAT): run $$id-r$$i"; \
	  $(PY) -m suite.launch --nproc $(NPROC) --backend gloo --device cpu $(SUITE_ARGS) --run-id $$id-r$$i \
	    $(PASSTHROUGH) || exit $$?; done; \
	  echo "# $(REPEAT) runs: $(RESULTS)/$$id-r1 .. $(RESULTS)/$$id-r$(REPEAT) (make compare BASE=$(RESULTS)/$$id NEW=...)"; fi

# GPUS = ranks on this host (default: every GPU torch sees); multi-node: NNODES, NODE_RANK,
# MASTER_ADDR (and MASTER_PORT) on the make command line of every host.
bench-gpu: venv
	@n=$(or $(GPUS),$$($(PY) -c "import torch; print(torch.cuda.device_count())")); \
	if [ "$$n" -lt 1 ]; then echo "error: torch sees no CUDA GPU (driver, CUDA_VISIBLE_DEVICES, a CPU-only" \
	  "torch build?); set GPUS, or run make bench-cpu" >&2; exit 2; fi; set -x; \
	$(PY) -m suite.launch --nproc $$n --backend nccl --device cuda $(SUITE_ARGS) $(PASSTHROUGH)

test: venv
	$(PY) -m pytest tests $(PYTEST_ARGS)

test-cpu: venv
	$(PY) -m pytest tests -m "not docker" $(PYTEST_ARGS)

# The unit tier: pure logic and one-rank in-process groups, seconds.
test-fast: venv
	$(PY) -m pytest tests/unit -q $(PYTEST_ARGS)

# The flake budget: a tier N times, failures per test (TIER = a folder of tests/, e.g. dist).
TIER ?= dist
N    ?= 20
soak: venv
	$(PY) scripts/soak.py $(N) tests/$(TIER) $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS))

clean:
	rm -rf $(VENV) .pytest_cache
