# Container image and the multi-node simulation (docker compose). Knobs:
#   make image [VARIANT=full|slim] [BASE_IMAGE=auto|local|<image>] [IMAGE=torch-comm-suite:latest]
#     full: CUDA torch + NCCL, slim: CPU torch; unset: full where its public base can be pulled,
#     else slim; BASE_IMAGE=local: the local Debian base and a wheelhouse, no registry (docker/image.sh)
#   make compose-up [NNODES=3] [NPROC_PER_NODE=2] [EXPERIMENTS=all] [LINK_RATE=200mbit] [LINK_DELAY=1ms] ...
#   make test-compose            the Docker tests (tests/docker/, tests/unit/test_compose_files.py)
#   make test-cuda-image         the CUDA image (VARIANT=full BASE_IMAGE=local) and its checks without a GPU
IMAGE          ?= torch-comm-suite:latest
VARIANT        ?=
BASE_IMAGE     ?= auto
NNODES         ?= 3
NPROC_PER_NODE ?= 2
LINK_RATE      ?=
LINK_DELAY     ?=
LINK_RATES     ?=
NODE_CPUS      ?=

.PHONY: image wheelhouse base-image compose-up test-compose test-cuda-image

# PIP_PYTHON runs `pip download` for the wheelhouse: default the project's venv (a fresh host's
# python3 may lack pip); tests pass their own interpreter.
PIP_PYTHON     ?=

image: $(if $(PIP_PYTHON),,venv)  ## build the Docker image (local base + wheelhouse where no registry is reachable)
	IMAGE=$(IMAGE) VARIANT=$(VARIANT) BASE_IMAGE=$(BASE_IMAGE) PIP_PYTHON=$(or $(PIP_PYTHON),$(PY)) docker/image.sh

base-image:  ## build the local Debian base image (docker/build-base.sh)
	docker/build-base.sh

wheelhouse: $(if $(PIP_PYTHON),,venv)  ## fill wheelhouse/ (VARIANT=full: wheelhouse-cuda/) from the package index
	VARIANT=$(or $(VARIANT),slim) PIP_PYTHON=$(or $(PIP_PYTHON),$(PY)) docker/wheelhouse.sh

# Same knobs as bench-cpu (sizes, dtypes, iterations, K ...), applied to every node.
compose-up:  ## the multi-node simulation (NNODES x NPROC_PER_NODE, shaped links), results in ./results
	IMAGE=$(IMAGE) NNODES=$(NNODES) NPROC_PER_NODE=$(NPROC_PER_NODE) EXPERIMENTS=$(EXPERIMENTS) \
	  MIN_BYTES=$(MIN_BYTES) MAX_BYTES=$(MAX_BYTES) STEP_FACTOR=$(STEP_FACTOR) DTYPES=$(DTYPES) \
	  REDOPS=$(REDOPS) ITERS=$(ITERS) WARMUP=$(WARMUP) TIMING=$(TIMING) PRECISION=$(PRECISION) \
	  MAX_TIME_S=$(MAX_TIME_S) BUDGET_S=$(BUDGET_S) TIMEOUT_S=$(TIMEOUT_S) HEARTBEAT_S=$(HEARTBEAT_S) TABLES=$(TABLES) K="$(K)" PYTEST_ARGS="$(PYTEST_ARGS)" RUN_ID=$(RUN_ID) \
	  RESULTS_DIR=$(abspath $(RESULTS)) LINK_RATE=$(LINK_RATE) LINK_DELAY=$(LINK_DELAY) \
	  LINK_RATES=$(LINK_RATES) NODE_CPUS=$(NODE_CPUS) \
	  docker/compose-run.sh

test-compose: venv  ## the Docker tests except the CUDA image's (tests -m "docker and not cuda_image")
	$(PY) -m pytest tests -m "docker and not cuda_image" $(PYTEST_ARGS)

# Builds (or reuses) the CUDA image from the local base and checks it without a GPU (tests/docker/
# test_cuda_image.py).
test-cuda-image: venv  ## the CUDA image built offline from the local base and checked without a GPU
	$(PY) -m pytest tests -m cuda_image $(PYTEST_ARGS)
