"""The collectives experiment's knob (make variable COLLECTIVES_GROUPS), nested in the run's config as
``cfg.collectives``."""

from __future__ import annotations

from dataclasses import dataclass, field

from suite.api import ConfigError

GROUPS = ("world", "interleaved")
"""``world``: every rank, group rank = global rank. ``interleaved``: the world split into its even and its odd
ranks, both halves running each collective at once; a rank's group rank is not its global rank (rank 3 of 4 is
rank 1 of the odd half, and the odd half's root 0 is global rank 1), so an op or a backend that takes one for the
other fails the exact check. torch's ``new_group`` sorts its ranks: a reversed order cannot be made."""


@dataclass(frozen=True, kw_only=True)
class CollectivesSettings:
    """Where each collective runs."""

    groups: tuple[str, ...] = field(default=("world",), metadata={"env": "COLLECTIVES_GROUPS"})
    """COLLECTIVES_GROUPS: the groups each collective of the sweep runs on (GROUPS), comma-separated."""

    def validate(self) -> None:
        unknown = sorted(set(self.groups) - set(GROUPS))
        if unknown or not self.groups:
            raise ConfigError(
                f"COLLECTIVES_GROUPS={','.join(self.groups)}: unknown or none ({', '.join(unknown)}); "
                f"choose from {', '.join(GROUPS)}"
            )
