"""The doctor's probes (make variables DOCTOR_*, EXPECT_LINK_RATE), nested in the run's config as
``cfg.doctor``."""

from __future__ import annotations

from dataclasses import dataclass, field

from suite.api import ConfigError


@dataclass(frozen=True, kw_only=True)
class DoctorSettings:
    """The doctor's probes (make variables DOCTOR_*, EXPECT_LINK_RATE; experiments/doctor/cases.py)."""

    small_bytes: int = field(default=64, metadata={"env": "DOCTOR_SMALL_BYTES"})
    """DOCTOR_SMALL_BYTES: the message of the pairwise latency probe (ping-pong)."""
    large_bytes: int = field(default=256 << 10, metadata={"env": "DOCTOR_LARGE_BYTES"})
    """DOCTOR_LARGE_BYTES: one message of the pairwise bandwidth probes and the ring (a window of them)."""
    window: int = field(default=4, metadata={"env": "DOCTOR_WINDOW"})
    """DOCTOR_WINDOW: messages in flight per bandwidth sample (OSU osu_bw's window, smaller: time)."""
    collective_bytes: tuple[int, ...] = field(default=(4 << 10, 64 << 10, 1 << 20), metadata={"env": "DOCTOR_SIZES"})
    """DOCTOR_SIZES: all_reduce and all_gather sizes whose per-rank times look for a straggler."""
    compute_ms: int = field(default=50, metadata={"env": "DOCTOR_COMPUTE_MS"})
    """DOCTOR_COMPUTE_MS: the fixed matmul work of the straggler probe lasts this long to twice this long on
    the slowest rank (calibrated once, the same work on every rank). Long enough that a CPU quota (a
    container's cpus, enforced per 100 ms period) binds within a sample, as it does in a training step."""
    expect_link_rate: str = field(default="", metadata={"env": "EXPECT_LINK_RATE"})
    """EXPECT_LINK_RATE: what an inter-node link should carry (a tc rate: 10gbit, 200mbit); empty: the
    compose LINK_RATE when the run has one, else no expectation (links are compared with their class)."""

    def validate(self) -> None:
        """Raise ConfigError naming the DOCTOR_* knob to change."""
        doc = self
        if not (4 <= doc.small_bytes <= doc.large_bytes) or not doc.collective_bytes or min(doc.collective_bytes) < 4:
            raise ConfigError(
                f"DOCTOR_SMALL_BYTES ({doc.small_bytes}) must be >= 4 and <= DOCTOR_LARGE_BYTES ({doc.large_bytes}); "
                f"DOCTOR_SIZES ({','.join(map(str, doc.collective_bytes))}) non-empty, each >= 4"
            )
        if doc.large_bytes * doc.window > 1 << 30:
            raise ConfigError(
                f"DOCTOR_LARGE_BYTES x DOCTOR_WINDOW = {doc.large_bytes * doc.window} B is more than 1 GiB in flight"
            )
        if not 1 <= doc.window <= 64:
            raise ConfigError(f"DOCTOR_WINDOW must be in 1..64, got {doc.window}")
        if not 1 <= doc.compute_ms <= 1000:
            raise ConfigError(f"DOCTOR_COMPUTE_MS must be in 1..1000, got {doc.compute_ms}")
        if doc.expect_link_rate and _link_rate_gbps(doc.expect_link_rate) is None:
            raise ConfigError(
                f"EXPECT_LINK_RATE={doc.expect_link_rate!r} is not a rate (examples: 10gbit, 200mbit, 125mbps)"
            )


def _link_rate_gbps(text: str):
    from suite.api import parse_link_rate  # numpy: imported only when a rate is given

    return parse_link_rate(text)
