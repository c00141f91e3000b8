# The collectives experiment (experiments/collectives/): every torch.distributed collective, exact (knobs: mk/knobs.mk).
#   make bench-cpu EXPERIMENTS=collectives COLLECTIVES_GROUPS=world,interleaved   # also on the even and odd halves
