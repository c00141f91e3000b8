"""``sp``: sequence parallel: LayerNorm ``SequenceParallel``, ``up`` Colwise with input Shard(1), ``down`` Rowwise
with output Shard(1) (a model of your own: its ``sp_plan``); each rank its slice of the sequence, the blocks'
output gathered before the head."""

from ..theory import sp_rows
from ..strategy import SP_PLAN, TP, Strategy

STRATEGY = Strategy(
    name="sp",
    what="LayerNorm `SequenceParallel`, `up` Colwise (input Shard(1)), `down` Rowwise (output Shard(1))",
    data="its slice of the sequence",
    mesh_dims=(TP,),
    plan=SP_PLAN,
    theory=sp_rows,
)
