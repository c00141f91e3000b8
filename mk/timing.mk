# The suite's time against the simplest honest loop (scripts/bare_loop.py imports nothing from the suite):
#   make timing-vs-bare [BARE_BACKEND=gloo|mpi] [BARE_ROUNDS=20] [BARE_TARGET_PCT=3] [BARE_SIZES=1024,65536,1048576]
#                       [BARE_ITERS=200] [BARE_NPROC=2] [BARE_PIN=1] [BARE_GAP_US=0]
# Interleaved rounds of the bare loop (in the suite's own ranks, and launched alone) and the suite's same case, each
# rank on a core of its own, until every size's ratio suite/bare has a 95% interval within BARE_TARGET_PCT % or
# BARE_ROUNDS (the cap) have run; per size the ratio's interval and the rounds that would narrow it (docs/metrics.md).
# BARE_GAP_US: the bare loop busy-waits that many microseconds before each sample, where the suite does its own work.
BARE_BACKEND    ?= gloo
BARE_ROUNDS     ?= 20
BARE_TARGET_PCT ?= 3
BARE_SIZES      ?= 1024,65536,1048576
BARE_ITERS      ?= 200
BARE_NPROC      ?= 2
BARE_PIN        ?= 1
BARE_GAP_US     ?= 0

.PHONY: timing-vs-bare
timing-vs-bare: venv  ## the suite's all_reduce time against a bare torch.distributed loop, pinned and interleaved
	$(PY) scripts/timing_vs_bare.py --backend $(BARE_BACKEND) --rounds $(BARE_ROUNDS) --target-pct $(BARE_TARGET_PCT) --nproc $(BARE_NPROC) --sizes $(BARE_SIZES) --iters $(BARE_ITERS) --warmup $(WARMUP) --gap-us $(BARE_GAP_US) $(if $(filter 1,$(BARE_PIN)),,--no-pin)

# The suite's own cost per op, in one process, on a one-rank group of each CPU backend and the null backend:
#   make suite-cost [COST_BACKENDS=null,gloo,mpi] [COST_SIZES=1024,65536,1048576] [COST_ITERS=400] [COST_ROUNDS=10]
#                   [COST_GAP_US=0]
# Interleaved rounds of the suite's harness and the bare loop; the added wall time per op with its 95% interval
# against the budget max(1% of the op, 0.5 us), the added CPU time, and where it goes (docs/metrics.md).
# COST_GAP_US: the bare loop busy-waits that many microseconds before each sample (what work there costs the next op).
COST_BACKENDS ?= null,gloo,mpi
COST_SIZES    ?= 1024,65536,1048576
COST_ITERS    ?= 400
COST_ROUNDS   ?= 10
COST_GAP_US   ?= 0

.PHONY: suite-cost
suite-cost: venv  ## the suite's own time and CPU per op against a bare loop, one process, 1-rank groups
	$(PY) scripts/suite_cost.py --backends $(COST_BACKENDS) --sizes $(COST_SIZES) --iters $(COST_ITERS) --rounds $(COST_ROUNDS) --warmup $(WARMUP) --gap-us $(COST_GAP_US)
