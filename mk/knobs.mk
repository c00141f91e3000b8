# The experiments' knobs, each declared and exported (make passes a knob set on its command line or in
# the environment to the launcher, which reads it once into the run's config.json). Written by
# python scripts/knob_files.py from each settings field's metadata: edit experiments/<name>/settings.py.
# collectives (experiments/collectives/settings.py)
COLLECTIVES_GROUPS ?=
export COLLECTIVES_GROUPS
# ddp (experiments/ddp/settings.py)
DDP_PARAMS ?=
DDP_BATCH ?=
DDP_BUCKET_FRACTIONS ?=
DDP_BUCKETS_MB ?=
DDP_HOOKS ?=
DDP_ACCUM ?=
DDP_POWERSGD_RANK ?=
export DDP_PARAMS DDP_BATCH DDP_BUCKET_FRACTIONS DDP_BUCKETS_MB DDP_HOOKS DDP_ACCUM DDP_POWERSGD_RANK
# doctor (experiments/doctor/settings.py)
DOCTOR_SMALL_BYTES ?=
DOCTOR_LARGE_BYTES ?=
DOCTOR_WINDOW ?=
DOCTOR_SIZES ?=
DOCTOR_COMPUTE_MS ?=
EXPECT_LINK_RATE ?=
export DOCTOR_SMALL_BYTES DOCTOR_LARGE_BYTES DOCTOR_WINDOW DOCTOR_SIZES DOCTOR_COMPUTE_MS EXPECT_LINK_RATE
# model_parallel (experiments/model_parallel/settings.py)
MP_IN ?=
MP_OUT ?=
MP_BATCH ?=
MP_STAGE_FEATURES ?=
MP_MICROBATCH_ROWS ?=
export MP_IN MP_OUT MP_BATCH MP_STAGE_FEATURES MP_MICROBATCH_ROWS
# recovery (experiments/recovery/settings.py)
RECOVERY_FAULTS ?=
RECOVERY_STEPS ?=
RECOVERY_CKPT_EVERY ?=
RECOVERY_CKPT_MODES ?=
RECOVERY_WORLD ?=
RECOVERY_SEED ?=
RECOVERY_TIMEOUT_S ?=
RECOVERY_DIR ?=
RECOVERY_BUG ?=
export RECOVERY_FAULTS RECOVERY_STEPS RECOVERY_CKPT_EVERY RECOVERY_CKPT_MODES RECOVERY_WORLD RECOVERY_SEED RECOVERY_TIMEOUT_S RECOVERY_DIR RECOVERY_BUG
# sharded (experiments/sharded/settings.py)
SHARDED_WIDTH ?=
SHARDED_DEPTH ?=
SHARDED_SEQ ?=
SHARDED_BATCH ?=
SHARDED_STRATEGIES ?=
SHARDED_MICROBATCHES ?=
SHARDED_MODEL ?=
export SHARDED_WIDTH SHARDED_DEPTH SHARDED_SEQ SHARDED_BATCH SHARDED_STRATEGIES SHARDED_MICROBATCHES SHARDED_MODEL
# inject (suite/inject/plan.py)
INJECT ?=
SEED ?=
INJECT_RUN_S ?=
export INJECT SEED INJECT_RUN_S
