"""Hello's knobs, nested in the run's config as ``cfg.hello``; each field's environment (= make)
variable is its ``metadata["env"]``."""

from __future__ import annotations

from dataclasses import dataclass, field

from suite.api import ConfigError


@dataclass(frozen=True, kw_only=True)
class HelloSettings:
    """Hello's knobs."""

    count: int = field(default=256, metadata={"env": "HELLO_COUNT"})
    """HELLO_COUNT: elements of the smaller all_reduce (the larger has four times as many)."""

    def validate(self) -> None:
        """Raise ConfigError naming the knob to change (the launcher exits 2 before any rank starts)."""
        if self.count < 1:
            raise ConfigError(f"HELLO_COUNT must be >= 1, got {self.count}")
