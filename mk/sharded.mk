# The sharded-training experiment (experiments/sharded/): DDP, FSDP2, TP, SP, a 2-D mesh and pipelines on one model.
#   make bench-cpu EXPERIMENTS=sharded SHARDED_WIDTH=256 SHARDED_DEPTH=4
#   make bench-cpu EXPERIMENTS=sharded SHARDED_STRATEGIES=fsdp2,fsdp2_keep
#   make bench-cpu EXPERIMENTS=sharded SHARDED_STRATEGIES=pp_gpipe,pp_1f1b,pp_interleaved   # each takes the blocks its stages need
#   make bench-cpu EXPERIMENTS=sharded SHARDED_MODEL=examples.sharded_model:build NPROC=2   # your own model
