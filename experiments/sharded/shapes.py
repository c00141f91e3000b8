"""The sharded experiment's pure shape arithmetic (no torch): the mesh a strategy runs on, its data-parallel
shards, whether it can run at a world size, the model's parameter shapes, and ``theory``, the collectives
one step should issue from the shapes alone.

Torch-free so that the offline step model (experiments/sharded/model.py, rule R2) can price theory's
collectives at a world size no run had; workload.py and inventory.py import these names from here.
"""

from __future__ import annotations

from .strategies import get
from .theory import ELEM, block_shapes, head_shapes, n_params  # noqa: F401  (the old names stay importable)


def mesh_shape(strategy: str, world: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The device mesh a strategy runs on: its shape and dimension names (Strategy.mesh)."""
    return get(strategy).mesh(world)


def dp_size(strategy: str, world: int) -> int:
    """Data-parallel shards of the batch's rows (1: every rank takes every row)."""
    return get(strategy).dp_size(world)


def mesh_cannot(strategy: str, world: int) -> str | None:
    """Why the strategy's mesh does not fit this world (2-D: 2 x world/2), or None."""
    return get(strategy).mesh_cannot(world)


def cannot_run(strategy: str, world: int, width: int, seq: int, batch_size: int) -> str | None:
    """Why ``strategy`` cannot run at this world size and shape (the same on every rank), or None."""
    st = get(strategy)
    if st.pipeline is not None:  # no mesh, no split rows: experiments/sharded/pipeline.py's cannot_run
        return None
    if why := st.mesh_cannot(world):
        return why
    dp = st.dp_size(world)
    if batch_size % dp:
        return f"SHARDED_BATCH={batch_size} does not split into {dp} data-parallel shards"
    tp = world // dp
    if tp > 1 and width % tp:
        return f"SHARDED_WIDTH={width} does not split over {tp} tensor-parallel ranks"
    if st.sequence_parallel and seq % world:
        return f"SHARDED_SEQ={seq} does not split over {world} sequence-parallel ranks"
    return None


def theory(strategy: str, d: int, depth: int, seq: int, batch: int, world: int) -> list[dict]:
    """The collectives one step should issue, from the shapes alone (each row: op, dtype, S bytes, group,
    phase, count); P = parameters, A = 4 x rows x seq x d, the float32 bytes of one activation:

    - ddp: all_reduce of the 4P gradient bytes in backward (DDP's buckets split it; one when it fits the
      first bucket);
    - fsdp2: forward all_gather of each unit (the head's root and every block) and, resharded after
      forward, of every block again in backward; backward reduce_scatter of each unit's float32 gradient;
      each unit's bytes its parameters with dim 0 padded to a multiple of the world: in all 3 x 4P when
      nothing is padded and the root is small, 1.5 x DDP's bus bytes (all_reduce moves 2(n-1)/n S,
      all_gather and reduce_scatter (n-1)/n S each);
    - fsdp2_keep: no backward all_gather (2 x 4P); fsdp2_bf16: the all_gathers in bfloat16 (2 bytes);
    - tp: per block one all_reduce of A in forward (the row-parallel output) and one in backward (the
      column-parallel input's gradient), on the tp group;
    - sp: per block an all_gather (the sequence before ``up``) and a reduce_scatter (``down``'s output) of A
      in forward and the same pair in backward, the LayerNorm weight and bias gradients (left Partial by
      backward) all-reduced by the SGD step (2 x 4d bytes per block, phase ``optimizer``), and one
      all_gather of A before the head;
    - 2d: tp as above with rows = batch / 2, and fsdp2 on the dp group over each tp rank's shards.
    """
    return get(strategy).theory(d, depth, seq, batch, world)
