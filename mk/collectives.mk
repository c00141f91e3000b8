# The collectives experiment (experiments/collectives/): every torch.distributed collective, exact.
#   make bench-cpu EXPERIMENTS=collectives COLLECTIVES_GROUPS=world,interleaved   # also on the even and odd halves
COLLECTIVES_GROUPS ?=
export COLLECTIVES_GROUPS
