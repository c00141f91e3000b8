# The doctor (experiments/doctor/cases.py probes, experiments/doctor/verdict.py verdicts): is anything wrong, and where.
#   make doctor [NPROC=6] [ITERS=20]            local ranks over Gloo (it refuses another BACKEND); exit 0
#                                               healthy, 8 a finding (make says 2, scripts/make-status doctor says 8)
#   make compose-doctor [NNODES=3] [LINK_RATE=200mbit] [LINK_RATES=node2=50mbit] [NODE_CPUS=node1=0.5]
#   make doctor-verdict RUN=results/<run>      the verdict of a stored run again (no probes run)
# Knobs: DOCTOR_SMALL_BYTES (64) DOCTOR_LARGE_BYTES (256K) DOCTOR_WINDOW (4) DOCTOR_SIZES (4K,64K,1M)
#   DOCTOR_COMPUTE_MS (50) EXPECT_LINK_RATE (e.g. 10gbit); ITERS trades time for confidence.
DOCTOR_ITERS  ?= 10
DOCTOR_WARMUP ?= 2
# what a doctor run takes: ITERS / WARMUP when given (command line, environment), else the doctor's own
DOCTOR_RUN_ITERS  = $(if $(filter command line environment,$(origin ITERS)),$(ITERS),$(DOCTOR_ITERS))
DOCTOR_RUN_WARMUP = $(if $(filter command line environment,$(origin WARMUP)),$(WARMUP),$(DOCTOR_WARMUP))

.PHONY: doctor compose-doctor doctor-verdict

doctor: venv  ## is anything wrong, and where: every link and rank on NPROC local ranks (fails on a finding: make-status 8)
	@case "$(BACKEND)" in gloo) ;; *) echo "error: make doctor probes CPU ranks over Gloo, not BACKEND=$(BACKEND):" \
	  "run make doctor without BACKEND (or BACKEND=gloo)" >&2; exit 2;; esac
	$(PY) -m suite.launch --nproc $(NPROC) --backend gloo --device cpu --experiments doctor \
	  --iters $(DOCTOR_RUN_ITERS) --warmup $(DOCTOR_RUN_WARMUP) \
	  --timeout-s $(TIMEOUT_S) --heartbeat-timeout-s $(HEARTBEAT_S) --tables $(TABLES) --results-root $(RESULTS) \
	  $(if $(RUN_ID),--run-id $(RUN_ID)) $(PASSTHROUGH)

compose-doctor:  ## the doctor across the compose simulation (LINK_RATES=, NODE_CPUS= make faults)
	$(MAKE) compose-up EXPERIMENTS=doctor ITERS=$(DOCTOR_RUN_ITERS) WARMUP=$(DOCTOR_RUN_WARMUP)

doctor-verdict: venv  ## RUN=results/<run>: the doctor's verdict of a stored run again
	$(PY) -m experiments.doctor.verdict $(RUN)
