# Pipeline knobs of the model-parallel experiment (experiments/model_parallel/cases.py); MP_IN/MP_OUT/MP_BATCH are in
# mk/ddp.mk. Example: make bench-cpu EXPERIMENTS=model_parallel MP_STAGE_FEATURES=1024 MP_MICROBATCH_ROWS=64
MP_STAGE_FEATURES  ?=
MP_MICROBATCH_ROWS ?=
export MP_STAGE_FEATURES MP_MICROBATCH_ROWS
