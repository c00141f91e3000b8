# The sharded-training experiment (experiments/sharded/): DDP, FSDP2, TP, SP and a 2-D mesh on one model.
#   make bench-cpu EXPERIMENTS=sharded SHARDED_WIDTH=256 SHARDED_DEPTH=4
#   make bench-cpu EXPERIMENTS=sharded SHARDED_STRATEGIES=fsdp2,fsdp2_keep
SHARDED_WIDTH  ?=
SHARDED_DEPTH  ?=
SHARDED_SEQ    ?=
SHARDED_BATCH  ?=
SHARDED_STRATEGIES ?=
export SHARDED_WIDTH SHARDED_DEPTH SHARDED_SEQ SHARDED_BATCH SHARDED_STRATEGIES
