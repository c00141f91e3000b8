# GPU hosts: tests that need CUDA, and a reference report of `make bench-gpu`.
#   make reference-gpu            on a GPU host; commit results/reference/<name>/ afterwards
REF_MAX_BYTES ?= 64M
REF_NAME      ?=

.PHONY: test-gpu reference-gpu gpu-check

test-gpu: venv  ## the GPU tests (NCCL, CUDA events and graphs)
	$(PY) -m pytest tests -m gpu $(PYTEST_ARGS)

# A quick sweep (1K..REF_MAX_BYTES) on every local GPU, stored under results/reference/
# named by GPU model, count and UTC date, with the command that produced it and its report.
reference-gpu: venv  ## a short reference sweep on the GPUs into results/reference/
	REF_MAX_BYTES=$(REF_MAX_BYTES) REF_NAME=$(REF_NAME) PY=$(PY) scripts/gpu_check.sh reference

# The whole GPU side in one call (< 8 min on one GPU): facts, every gpu test, a short reference
# sweep; logs (at most 8 files) under LOG_DIR. Needs no venv: uses python3 where there is none.
LOG_DIR ?= results/gpu-check
gpu-check:  ## LOG_DIR=dir: the whole GPU side in one call (tests + reference sweep)
	LOG_DIR=$(LOG_DIR) scripts/gpu_check.sh all
