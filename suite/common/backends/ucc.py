"""UCC: torch's backend over UCX/UCC, where the build has it."""

from __future__ import annotations

from suite.common.backends.record import Backend


def available() -> bool:
    import torch.distributed as dist

    return getattr(dist, "is_ucc_available", lambda: False)()


BACKEND = Backend(
    name="ucc", order=4, lane_order=4, label="UCC", devices=("cpu", "cuda"), available=available, version=available
)
