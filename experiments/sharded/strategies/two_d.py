"""``2d``: a (dp=2, tp=world/2) mesh: ``tp`` on the tp dimension, FSDP2 on the dp dimension; each dp rank its
rows. Needs an even world of 4 or more (Strategy.mesh_cannot)."""

from ..theory import fsdp_theory, tp_rows
from ..strategy import DP, TP, TP_PLAN, Strategy

_fsdp = fsdp_theory(reshard=True)

STRATEGY = Strategy(
    name="2d",
    what="a (dp=2, tp=world/2) mesh: `tp` on tp, FSDP2 on dp; needs an even world of 4 or more",
    data="its dp rows",
    mesh_dims=(DP, TP),
    fsdp=True,
    plan=TP_PLAN,
    theory=lambda d, depth, seq, batch, world: (
        _fsdp(d, depth, seq, batch, world, dp=2) + tp_rows(d, depth, seq, batch, world, dp=2)
    ),
)
