# The suite's time against the simplest honest loop (scripts/bare_loop.py imports nothing from the suite):
#   make timing-vs-bare [BARE_ROUNDS=3] [BARE_SIZES=1024,65536,1048576] [BARE_ITERS=200] [BARE_NPROC=2]
# Interleaved rounds of the bare loop (in the suite's own ranks, and launched alone) and the suite's same case;
# per size the ratio suite/bare with its range over rounds. Meaningful on an idle machine (docs/metrics.md).
BARE_ROUNDS ?= 3
BARE_SIZES  ?= 1024,65536,1048576
BARE_ITERS  ?= 200
BARE_NPROC  ?= 2

.PHONY: timing-vs-bare
timing-vs-bare: venv  ## the suite's all_reduce time against a bare torch.distributed loop, interleaved
	$(PY) scripts/timing_vs_bare.py --rounds $(BARE_ROUNDS) --nproc $(BARE_NPROC) --sizes $(BARE_SIZES) --iters $(BARE_ITERS) --warmup $(WARMUP)
