# Kubernetes: a run's manifest (suite/deploy/k8s/), from the same knobs as bench-gpu and compose-up, checked by the
# launcher and against the custom resource's schema before it is written. Nothing here talks to a cluster.
#   make k8s [KIND=trainjob|jobset] [JOB=bench|doctor] [NNODES=3] [GPUS=8] [IMAGE=torch-comm-suite:latest]
#            [RESULTS_PVC=torch-comm-suite-results] [K8S_OUT=-|dir] [EXPERIMENTS=...] [MAX_BYTES=...] [RUN_ID=...]
#   KIND=trainjob: a Kubeflow Trainer TrainJob on the torch-distributed runtime; jobset: a plain JobSet.
#   JOB=doctor: the doctor alone as a short job (ITERS/WARMUP as make doctor's, K8S_DEADLINE_S 900 s).
#   K8S_SHM (/dev/shm, a Kubernetes quantity; default 1Gi per GPU), K8S_NAME (default from RUN_ID),
#   K8S_DEADLINE_S (activeDeadlineSeconds). IMAGE is the image make image VARIANT=full builds; its default names no
#   registry, so no cluster can pull it (make k8s warns): push the image and pass IMAGE=<registry>/<name>:<tag>.
KIND           ?= trainjob
JOB            ?= bench
RESULTS_PVC    ?= torch-comm-suite-results
K8S_OUT        ?= -
K8S_SHM        ?=
K8S_NAME       ?=
K8S_DEADLINE_S ?=

.PHONY: k8s

# the doctor's knobs after the run's (the last of an option wins): its iterations, no sample budget
K8S_DOCTOR_ARGS = --experiments doctor --iters $(DOCTOR_RUN_ITERS) --warmup $(DOCTOR_RUN_WARMUP) \
  --budget-s $(if $(filter command line environment,$(origin BUDGET_S)),$(BUDGET_S),0)

# the doctor, a health check before a long run, ends within 15 minutes unless K8S_DEADLINE_S says otherwise
K8S_RUN_DEADLINE_S = $(or $(K8S_DEADLINE_S),$(if $(filter doctor,$(JOB)),900))

k8s: venv  ## a run's Kubernetes manifest (KIND=trainjob|jobset, JOB=bench|doctor), schema-checked; K8S_OUT=dir or stdout
	@$(PY) -m suite.deploy.k8s --kind $(KIND) --job $(JOB) --image $(IMAGE) --pvc $(RESULTS_PVC) --out $(K8S_OUT) \
	  $(if $(K8S_SHM),--shm $(K8S_SHM)) $(if $(K8S_NAME),--name $(K8S_NAME)) \
	  $(if $(K8S_RUN_DEADLINE_S),--deadline-s $(K8S_RUN_DEADLINE_S)) --nnodes $(NNODES) --nproc $(or $(GPUS),8) \
	  $(SUITE_ARGS) $(if $(filter doctor,$(JOB)),$(K8S_DOCTOR_ARGS)) $(PASSTHROUGH)
