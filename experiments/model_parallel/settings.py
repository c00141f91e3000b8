"""The model-parallel experiment's knobs (make variables MP_*), nested in the run's config as
``cfg.model_parallel``."""

from __future__ import annotations

from dataclasses import dataclass, field

from suite.api import ConfigError


@dataclass(frozen=True, kw_only=True)
class ModelParallelSettings:
    """The model-parallel experiment's split layer and global batch (make variables MP_*)."""

    in_features: int = field(default=2048, metadata={"env": "MP_IN"})
    """MP_IN: input features of the split Linear layer."""
    out_features: int = field(default=2048, metadata={"env": "MP_OUT"})
    """MP_OUT: output features (split by rows over the ranks)."""
    batch: int = field(default=64, metadata={"env": "MP_BATCH"})
    """MP_BATCH: global batch."""
    stage_features: int = field(default=512, metadata={"env": "MP_STAGE_FEATURES"})
    """MP_STAGE_FEATURES: width d of each pipeline stage's layer (a d x d matmul per micro-batch: the
    stage's compute; 512 with 128 rows makes compute and one hop's transfer comparable on CPU Gloo)."""
    microbatch_rows: int = field(default=128, metadata={"env": "MP_MICROBATCH_ROWS"})
    """MP_MICROBATCH_ROWS: rows of one pipeline micro-batch (rows x d float32 cross each hop)."""

    def validate(self) -> None:
        """Raise ConfigError naming the MP_* knob to change."""
        mp = self
        if min(mp.in_features, mp.out_features, mp.batch) < 1:
            raise ConfigError(f"MP_IN, MP_OUT and MP_BATCH must be >= 1, got {mp}")
        if min(mp.stage_features, mp.microbatch_rows) < 1:
            raise ConfigError(f"MP_STAGE_FEATURES and MP_MICROBATCH_ROWS must be >= 1, got {mp}")
        if mp.stage_features > 16384 or mp.microbatch_rows * mp.stage_features > 1 << 28:
            raise ConfigError(
                f"MP_STAGE_FEATURES={mp.stage_features} x MP_MICROBATCH_ROWS={mp.microbatch_rows} is too large "
                "(a stage's weight is d x d float32: d <= 16384; a micro-batch at most 2^28 elements)"
            )
