"""``tp``: tensor parallel: ColwiseParallel ``up`` and RowwiseParallel ``down`` in every block (a model of your
own: its ``tp_plan``) on a 1-D mesh over the world; every rank the whole batch."""

from ..theory import tp_rows
from ..strategy import TP, TP_PLAN, Strategy

STRATEGY = Strategy(
    name="tp",
    what="ColwiseParallel `up`, RowwiseParallel `down` in every block",
    data="the whole batch",
    mesh_dims=(TP,),
    plan=TP_PLAN,
    theory=tp_rows,
)
