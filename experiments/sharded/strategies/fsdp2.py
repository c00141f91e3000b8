"""``fsdp2``: ``fully_shard`` on every block (``reshard_after_forward=True``) and on the root (FSDP2's default:
kept after forward, its backward comes first); each rank its rows."""

from ..theory import fsdp_theory
from ..strategy import Strategy

STRATEGY = Strategy(
    name="fsdp2",
    what="`fully_shard` on every block (`reshard_after_forward=True`) and on the root (FSDP2's default: kept)",
    data="its rows",
    fsdp=True,
    exact_at_two=True,
    theory=fsdp_theory(reshard=True),
)
