# The front door. Knobs are make variables: `make bench-cpu NPROC=2 MAX_BYTES=64M`.
# make exits 2 whenever a recipe fails; `scripts/make-status <target> [KNOB=value ...]` exits with the
# failed command's own status (docs/failures.md): it sets MAKE_STATUS_FILE, and every recipe line then
# runs through scripts/recipe-shell, which writes the status of the first line that failed there.
ifdef MAKE_STATUS_FILE
SHELL := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))/scripts/recipe-shell
endif
PYTHON      ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python

NPROC       ?= auto
BACKEND     ?= gloo
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
# the per-case sample budget; off when ITERS is given (the user asked for a count)
BUDGET_S    ?= $(if $(filter file default undefined,$(origin ITERS)),0.5,0)
TIMEOUT_S   ?= 60
HEARTBEAT_S ?= 15
# 1: the full tables in the terminal too (they are always in <run>/tables.txt and the report)
TABLES      ?= 0
DEBUG       ?=
RESULTS     ?= results
RUN_ID      ?=
REPEAT      ?= 1
K           ?=
PYTEST_ARGS ?=
# V=1: make shows every command it runs (the launcher's command line among them); quiet otherwise
V           ?=
ifneq ($(V),1)
.SILENT:
endif
# Every upper-case variable on make's command line must be a knob: a misspelled one (MAXBYTES=64M) is refused,
# naming the nearest, before any target starts (scripts/make_vars.py); the environment is not checked. A PYTHON
# that cannot run it (too old: make venv says so) checks nothing.
_CMDLINE := $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $v)),'$v'))
_REFUSED := $(if $(strip $(_CMDLINE)),$(shell $(PYTHON) scripts/make_vars.py $(_CMDLINE) 2>/dev/null))
ifneq ($(_REFUSED),)
$(error $(_REFUSED))
endif

SUITE_ARGS = --experiments $(EXPERIMENTS) --min-bytes $(MIN_BYTES) --max-bytes $(MAX_BYTES) \
  --step-factor $(STEP_FACTOR) --dtypes $(DTYPES) --redops $(REDOPS) --iters $(ITERS) --warmup $(WARMUP) \
  --timing $(TIMING) --pipeline-depth $(PIPELINE_DEPTH) --root $(ROOT) --precision-pct $(PRECISION) --max-time-s $(MAX_TIME_S) --budget-s $(BUDGET_S) --timeout-s $(TIMEOUT_S) \
  --heartbeat-timeout-s $(HEARTBEAT_S) --tables $(TABLES) --results-root $(RESULTS) $(if $(RUN_ID),--run-id $(RUN_ID)) \
  $(if $(DEBUG),--debug)
PASSTHROUGH = -- $(if $(K),-k "$(K)") $(PYTEST_ARGS)

.PHONY: help venv bench-cpu bench-gpu test test-cpu test-fast lint soak clean

# Feature areas add their targets in mk/*.mk (image, compose, report, slurm, ...).
-include $(sort $(wildcard mk/*.mk))

help:  ## every target with its one-line purpose (this list, read from the Makefiles)
	@echo "make <target> [KNOB=value ...]   (knobs: README \"Knobs\"; each mk/*.mk lists its own)"
	@awk 'FNR == 1 { file = FILENAME } /^[a-zA-Z0-9_-]+:.*  ## / { split($$0, a, ":"); sub(/^.*  ## /, ""); \
	  printf "  make %-18s %s\n", a[1], $$0 }' $(MAKEFILE_LIST)
	@echo "output: a run ends with a summary of at most 10 lines; TABLES=1 prints its full tables above it"
	@echo "  (they are always in <run>/tables.txt and the report: docs/reports.md)"
	@echo "environment switches (docs/switches.md): SUITE_PROGRESS SUITE_PROGRESS_S SUITE_PROFILE SUITE_REPORT"
	@echo "  SUITE_ALL_RANKS_OUTPUT SUITE_KEEP_RANK_SAMPLES SUITE_GIT_COMMIT SUITE_INJECT_CORRUPTION SUITE_INJECT_DELAY"
	@echo "  SUITE_INJECT_MISMATCH SUITE_INJECT_DIVERGE SUITE_INJECT_FAULT SUITE_INJECT_BACKEND"
	@echo "exit status: make exits 2 whenever a target fails; scripts/make-status <target> [KNOB=value ...]"
	@echo "  exits with the suite's own (launcher 1-10, 130 on Ctrl-C, 143 on SIGTERM; compare 1 or 3; doctor 8:"
	@echo "  docs/failures.md); V=1 shows every command make runs"

venv: $(VENV)/.installed  ## create .venv with the pinned environment (requirements.txt)
$(VENV)/.installed: requirements.txt requirements-dev.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "error: the suite needs Python >= 3.11 (its number formats use the z option), this is " + sys.version.split()[0] + ": set PYTHON=python3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -r requirements-dev.txt
	touch $@

# REPEAT=k: k runs one after another, run ids <RUN_ID or a UTC timestamp>-r1 .. -rk; `make compare`
# takes results/<id> for all of them (a side of several runs: between-run variation is measured).
bench-cpu: venv  ## every experiment on NPROC local ranks (Gloo, CPU; BACKEND=mpi: MPI); REPEAT=k for k runs
	@case "$(REPEAT)" in ''|*[!0-9]*|0*) echo "error: REPEAT must be a positive integer, got '$(REPEAT)'" >&2; exit 2;; esac; \
	case "$(BACKEND)" in nccl) echo "error: BACKEND=nccl runs on GPUs: make bench-gpu (make bench-cpu takes BACKEND=gloo or mpi)" >&2; \
	  exit 2;; esac; \
	if [ "$(REPEAT)" = 1 ]; then $(if $(filter 1,$(V)),set -x;) \
	  $(PY) -m suite.launch --nproc $(NPROC) --backend $(BACKEND) --device cpu $(SUITE_ARGS) $(PASSTHROUGH); \
	else id=$(or $(RUN_ID),$$(date -u +%Y%m%d-%H%M%S)); for i in $$(seq $(REPEAT)); do \
	  echo "# repeat $$i of $(REPEAT): run $$id-r$$i"; \
	  $(PY) -m suite.launch --nproc $(NPROC) --backend $(BACKEND) --device cpu $(SUITE_ARGS) --run-id $$id-r$$i \
	    $(PASSTHROUGH) || exit $$?; done; \
	  echo "# $(REPEAT) runs: $(RESULTS)/$$id-r1 .. $(RESULTS)/$$id-r$(REPEAT) (make compare BASE=$(RESULTS)/$$id NEW=...)"; fi

# GPUS = ranks on this host (default: every GPU torch sees); multi-node: NNODES, NODE_RANK,
# MASTER_ADDR (and MASTER_PORT) on the make command line of every host.
bench-gpu: venv  ## every experiment on all local GPUs (NCCL)
	@n=$(or $(GPUS),$$($(PY) -c "import torch; print(torch.cuda.device_count())")); \
	if [ "$$n" -lt 1 ]; then echo "error: torch sees no CUDA GPU (driver, CUDA_VISIBLE_DEVICES, a CPU-only" \
	  "torch build?); set GPUS, or run make bench-cpu" >&2; exit 2; fi; $(if $(filter 1,$(V)),set -x;) \
	$(PY) -m suite.launch --nproc $$n --backend nccl --device cuda $(SUITE_ARGS) $(PASSTHROUGH)

# The tiers one by one, cheapest first, each with its time against its budget (scripts/tiers.py):
# the unit tier stops at its first failure, before the multi-process tiers start.
test: venv lint  ## every test of the project (what CI runs), after make lint; unit tier first
	$(PY) scripts/tiers.py -- $(PYTEST_ARGS)

# The linters, pinned in requirements-dev.txt; each rule that does not fit is disabled where it is
# configured, with its reason (pyproject.toml [tool.ruff], .hadolint.yaml, .github/actionlint.yaml,
# `# shellcheck disable=` lines).
lint: venv  ## ruff (check + format), shellcheck on every shell script, hadolint, actionlint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/shellcheck $$(git ls-files '*.sh' '*.sbatch' .ci/run) scripts/make-status scripts/recipe-shell
	$(VENV)/bin/hadolint Dockerfile
	$(VENV)/bin/actionlint

test-cpu: venv  ## the tests that need no Docker; unit tier first
	$(PY) scripts/tiers.py --tiers unit,dist,e2e,gpu -- -m "not docker" $(PYTEST_ARGS)

# The unit tier: pure logic and one-rank in-process groups (its figures: docs/tests.md, the README's Quick start).
test-fast: venv  ## the unit tier (tests/unit): about 2,120 tests, 75 s on an idle 2-core machine (2 workers)
	$(PY) scripts/tiers.py --tiers unit -- -q $(PYTEST_ARGS)

# The flake budget: a tier N times, failures per test (TIER = a folder of tests/, e.g. dist).
TIER ?= dist
N    ?= 20
soak: venv  ## TIER=dist N=20: a test tier N times, failures per test
	$(PY) scripts/soak.py $(N) tests/$(TIER) $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS))

clean:  ## remove .venv and the pytest cache
	rm -rf $(VENV) .pytest_cache
