"""The sharded experiment's knobs (make variables SHARDED_*), nested in the run's config as ``cfg.sharded``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from suite.api import ConfigError

from .strategies import PLANTED as PLANTED_STRATEGIES
from .strategies import STRATEGIES as REGISTERED
from .strategies import get as strategy_of

STRATEGIES = tuple(REGISTERED)
"""The strategies run by default, in order (experiments/sharded/strategies/: one file each)."""
PLANTED = tuple(PLANTED_STRATEGIES)
"""Wrong on purpose, run only when named (the check's own tests: experiments/sharded/strategies/planted.py)."""


@dataclass(frozen=True, kw_only=True)
class ShardedSettings:
    """The sharded experiment's model and batch (make variables SHARDED_*)."""

    width: int = field(default=32, metadata={"env": "SHARDED_WIDTH"})
    """SHARDED_WIDTH: model width d (each block is Linear(d, 4d) and Linear(4d, d))."""
    depth: int = field(default=2, metadata={"env": "SHARDED_DEPTH"})
    """SHARDED_DEPTH: blocks in the model (a pipeline whose stages outnumber its layers takes more:
    ``for_strategy``)."""
    seq: int = field(default=8, metadata={"env": "SHARDED_SEQ"})
    """SHARDED_SEQ: sequence length of each sample."""
    batch: int = field(default=8, metadata={"env": "SHARDED_BATCH"})
    """SHARDED_BATCH: global batch (samples per step over all ranks)."""
    strategies: tuple[str, ...] = field(default=STRATEGIES, metadata={"env": "SHARDED_STRATEGIES"})
    """SHARDED_STRATEGIES: strategies to run (STRATEGIES; PLANTED ones are wrong on purpose)."""
    microbatches: int = field(default=4, metadata={"env": "SHARDED_MICROBATCHES"})
    """SHARDED_MICROBATCHES: micro-batches per step of the pipeline strategies (pp_*); divides SHARDED_BATCH."""
    model: str = field(default="", metadata={"env": "SHARDED_MODEL"})
    """SHARDED_MODEL: ``module:function``, a factory of your own model (experiments/sharded/user_model.py);
    empty: the built-in model family. Loaded and checked on the host before any rank starts. The recovery experiment
    trains it too, instead of its MLP (experiments/recovery/user.py)."""

    def for_strategy(self, strategy: str, world: int) -> ShardedSettings:
        """The settings ``strategy``'s case runs on the built-in model at ``world`` ranks: these, but for a pipeline
        (``pp_*``) whose stages (world x stages per rank) outnumber the layers (``depth`` blocks and the head),
        the fewest blocks that give each stage one layer (stages - 1): the default run's 2 blocks cannot make the
        4 stages of a 4-rank GPipe, nor the 8 of its interleaved schedule."""
        pipeline = strategy_of(strategy).pipeline
        if pipeline is None or self.depth + 1 >= world * pipeline.stages_per_rank:
            return self
        stages = world * pipeline.stages_per_rank
        return dataclasses.replace(self, depth=stages - 1)

    def validate(self) -> None:
        """Raise ConfigError naming the SHARDED_* knob to change."""
        s = self
        if s.width < 1 or s.depth < 1 or s.seq < 1 or s.batch < 1:
            raise ConfigError(
                f"bad sharded settings {s}: need SHARDED_WIDTH, SHARDED_DEPTH, SHARDED_SEQ and SHARDED_BATCH >= 1"
            )
        if s.width * s.seq * s.batch > 1 << 26 or s.width > 8192:
            raise ConfigError(
                f"SHARDED_WIDTH={s.width} x SHARDED_SEQ={s.seq} x SHARDED_BATCH={s.batch} is too large "
                "(an activation is at most 2^26 elements, the width at most 8192)"
            )
        unknown = sorted(set(s.strategies) - set(STRATEGIES) - set(PLANTED))
        if unknown or not s.strategies:
            raise ConfigError(
                f"SHARDED_STRATEGIES {','.join(s.strategies)}: unknown or none ({', '.join(unknown)}); "
                f"choose from {', '.join(STRATEGIES)} (wrong on purpose, the check's own tests: {', '.join(PLANTED)})"
            )
        pp = [x for x in s.strategies if strategy_of(x).pipeline is not None]
        if pp and s.microbatches < 1:
            raise ConfigError(f"SHARDED_MICROBATCHES={s.microbatches}: the pipeline strategies need at least 1")
        if pp and not s.model and s.batch % s.microbatches:  # a model's own batch: user_model.not_dividing
            raise ConfigError(
                f"SHARDED_MICROBATCHES={s.microbatches} does not divide SHARDED_BATCH={s.batch} (the pipeline "
                f"strategies {','.join(pp)} split each step's batch into equal micro-batches): choose a divisor"
            )
