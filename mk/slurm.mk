# Slurm: the suite as a batch job (scripts/slurm/suite.sbatch: one task per node, each
# running python -m suite.launch, i.e. torchrun), and a local single-node cluster for the tests.
#   make bench-slurm NODES=2 SBATCH_ARGS="--partition=gpu --gpus-per-node=8" MAX_BYTES=1G
NODES       ?= 1
SBATCH_ARGS ?=

.PHONY: bench-slurm slurm-up test-slurm

# Waits for the job, prints its output, exits with its status. NPROC/BACKEND/DEVICE
# given on the make command line reach the job (default: all GPUs with NCCL, else 4 Gloo ranks).
bench-slurm: venv  ## the suite as a Slurm batch job (NODES, SBATCH_ARGS)
	@mkdir -p $(RESULTS)
	@jid=$$(PYTHON=$(PY) sbatch --parsable --wait --nodes=$(NODES) --output=$(RESULTS)/slurm-%j.out $(SBATCH_ARGS) \
	  scripts/slurm/suite.sbatch $(SUITE_ARGS) $(PASSTHROUGH)); rc=$$?; jid=$${jid%%;*}; \
	  [ -n "$$jid" ] && cat $(RESULTS)/slurm-$$jid.out; exit $$rc

# Install and start a one-node Slurm on this machine (root; what CI runs).
slurm-up:  ## install and start a one-node Slurm on this machine (root; CI)
	bash .ci/setup.d/30-slurm.sh

test-slurm: venv  ## the Slurm tests (tests/e2e/test_slurm.py)
	$(PY) -m pytest tests/e2e/test_slurm.py $(PYTEST_ARGS)
