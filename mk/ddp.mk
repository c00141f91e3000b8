# DDP and model-parallel experiments (experiments/ddp/cases.py, experiments/model_parallel/cases.py).
# Their knobs are environment variables the launcher reads once into the run's config (config.json);
# set them on the make line:
#   make bench-cpu EXPERIMENTS=ddp DDP_PARAMS=25M      # a 100 MB gradient all_reduce per step
#   make bench-cpu PROFILE=1                           # torch.profiler trace per case and rank
#   make bench-cpu PROFILE=mlp-ddp]                    # ... only for cases whose id contains this
PROFILE        ?=
EXAMPLE_NPROC  ?= 2
ifneq ($(strip $(PROFILE)),)
export SUITE_PROFILE := $(PROFILE)
endif

.PHONY: bench-ddp ddp-example teardown-rate

bench-ddp: venv  ## the DDP and model-parallel experiments only (Gloo, CPU)
	$(MAKE) bench-cpu EXPERIMENTS=ddp,model_parallel

ddp-example: venv  ## the source article's DDP example, unchanged, under torchrun
	$(PY) -m torch.distributed.run --standalone --nproc-per-node $(EXAMPLE_NPROC) examples/ddp_source_example.py

# How often the article's example aborts at exit with Gloo, beside the corrected teardown (N runs each).
TEARDOWN_N ?= 40
teardown-rate: venv  ## scripts/teardown_rate.py: the Gloo teardown race, measured
	$(PY) scripts/teardown_rate.py $(TEARDOWN_N)
