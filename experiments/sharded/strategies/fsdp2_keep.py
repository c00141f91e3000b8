"""``fsdp2_keep``: ``fsdp2`` with ``reshard_after_forward=False`` on the blocks (no backward all_gather)."""

from ..theory import fsdp_theory
from ..strategy import Strategy

STRATEGY = Strategy(
    name="fsdp2_keep",
    what="the same with `reshard_after_forward=False` on the blocks",
    data="its rows",
    fsdp=True,
    reshard_after_forward=False,
    exact_at_two=True,
    theory=fsdp_theory(reshard=False),
)
