"""``ddp``: DistributedDataParallel, each rank its rows of the batch (the baseline every other strategy's bytes
and memory are set against)."""

from ..theory import ddp_rows
from ..strategy import Strategy

STRATEGY = Strategy(
    name="ddp",
    what="DistributedDataParallel (the baseline)",
    data="its rows",
    ddp=True,
    exact_at_two=True,
    theory=ddp_rows,
)
