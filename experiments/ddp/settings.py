"""The DDP experiment's knobs (make variables DDP_*), nested in the run's config as ``cfg.ddp``."""

from __future__ import annotations

from dataclasses import dataclass, field

from suite.api import ConfigError

DDP_HOOK_NAMES = ("allreduce", "fp16_compress", "bf16_compress", "powerSGD", "sum", "fp16_scaled", "bn_skew")
"""DDP_HOOKS choices (experiments/ddp/cases.py registers each); ``sum`` all-reduces without dividing by the world
size, ``fp16_scaled`` is fp16 compression whose average comes back 1.01 times too large, ``bn_skew`` averages
correctly but moves BatchNorm running_mean by 2^-10 (all three wrong on purpose)."""


@dataclass(frozen=True, kw_only=True)
class DdpSettings:
    """The DDP experiment's knobs (make variables DDP_*)."""

    params: int = field(default=2_000_000, metadata={"env": "DDP_PARAMS"})
    """DDP_PARAMS: parameter budget of the MLP (suffixes K/M/G, e.g. 25M)."""
    batch_per_rank: int = field(default=32, metadata={"env": "DDP_BATCH"})
    """DDP_BATCH: samples per rank per (micro-)step; the article uses 32."""
    bucket_fractions: tuple[float, ...] = field(
        default=(0.125, 0.5, 1.0, 2.0), metadata={"env": "DDP_BUCKET_FRACTIONS"}
    )
    """DDP_BUCKET_FRACTIONS: bucket caps swept, as fractions of the MLP's gradient bytes."""
    buckets_mb: tuple[float, ...] = field(default=(), metadata={"env": "DDP_BUCKETS_MB"})
    """DDP_BUCKETS_MB: absolute bucket_cap_mb values swept besides the fractions (and DDP's default 25)."""
    hooks: tuple[str, ...] = field(
        default=("allreduce", "fp16_compress", "bf16_compress", "powerSGD"), metadata={"env": "DDP_HOOKS"}
    )
    """DDP_HOOKS: communication hooks to run (DDP_HOOK_NAMES; ``sum``, ``fp16_scaled`` and ``bn_skew`` are wrong on
    purpose: the check's own tests)."""
    accum: int = field(default=4, metadata={"env": "DDP_ACCUM"})
    """DDP_ACCUM: micro-batches per optimizer step in the gradient-accumulation cases."""
    powersgd_rank: int = field(default=1, metadata={"env": "DDP_POWERSGD_RANK"})
    """DDP_POWERSGD_RANK: PowerSGD matrix_approximation_rank."""
    timed_only: int = field(default=0, metadata={"env": "DDP_TIMED_ONLY"})
    """DDP_TIMED_ONLY: 1 times (and watches) the training step cases only: they are not checked against
    single-process training (no reference steps; their records say unchecked, and why) and take no baseline steps
    (solo, no communication, no-op hook, all_reduce alone: the fields derived from them are left out). The fail-slow
    bench's trials set it: they score detection, not exactness. 0 (default): every synchronised case checked."""

    def validate(self) -> None:
        """Raise ConfigError naming the DDP_* knob to change."""
        d = self
        if (
            d.params < 1000
            or d.batch_per_rank < 2
            or d.accum < 2
            or d.powersgd_rank < 1
            or d.timed_only not in (0, 1)
            or any(not b > 0 for b in d.buckets_mb + d.bucket_fractions)
        ):
            raise ConfigError(
                f"bad DDP settings {d}: need DDP_PARAMS >= 1000, DDP_BATCH >= 2 (BatchNorm), "
                "DDP_ACCUM >= 2, DDP_POWERSGD_RANK >= 1, DDP_TIMED_ONLY 0 or 1, DDP_BUCKETS_MB and "
                "DDP_BUCKET_FRACTIONS > 0"
            )
        if set(d.hooks) - set(DDP_HOOK_NAMES):
            raise ConfigError(
                f"DDP_HOOKS {','.join(d.hooks)}: unknown hook(s) "
                f"{', '.join(sorted(set(d.hooks) - set(DDP_HOOK_NAMES)))}; choose from {', '.join(DDP_HOOK_NAMES)}"
            )
