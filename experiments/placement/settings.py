"""The placement experiment's knobs, nested in the run's config as ``cfg.placement``."""

from __future__ import annotations

from dataclasses import dataclass, field

from suite.api import ConfigError


@dataclass(frozen=True, kw_only=True)
class PlacementSettings:
    """The placement experiment's knobs."""

    fake_nodes: int = field(default=0, metadata={"env": "SUITE_FAKE_NODES"})
    """SUITE_FAKE_NODES: group the ranks into this many simulated nodes for the hierarchical
    all_reduce (0 = the real hosts)."""

    def validate(self) -> None:
        """Raise ConfigError naming the knob to change."""
        if self.fake_nodes < 0:
            raise ConfigError(f"SUITE_FAKE_NODES must be >= 0, got {self.fake_nodes}")
