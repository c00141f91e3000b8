# Pipeline knobs of the model-parallel experiment (experiments/model_parallel/cases.py; all its knobs: mk/knobs.mk).
# Example: make bench-cpu EXPERIMENTS=model_parallel MP_STAGE_FEATURES=1024 MP_MICROBATCH_ROWS=64
