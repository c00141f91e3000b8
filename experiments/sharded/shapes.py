"""The sharded experiment's pure shape arithmetic (no torch): the mesh a strategy runs on, its data-parallel
shards, whether it can run at a world size, the model's parameter shapes, and ``theory``, the collectives
one step should issue from the shapes alone.

Torch-free so that the offline step model (experiments/sharded/model.py, rule R2) can price theory's
collectives at a world size no run had; workload.py and inventory.py import these names from here.
"""

from __future__ import annotations

import math

DATA_PARALLEL = {"ddp", "fsdp2", "fsdp2_keep", "fsdp2_bf16", "fsdp2_scaled"}
"""Strategies whose ranks split the batch's rows over the whole world."""
FSDP = {"fsdp2", "fsdp2_keep", "fsdp2_bf16", "fsdp2_scaled"}
TENSOR_PARALLEL = {"tp", "sp", "tp_wrong_shard"}
"""Strategies whose mesh is one tensor-parallel dimension over the whole world."""


def mesh_shape(strategy: str, world: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The device mesh a strategy runs on: its shape and dimension names."""
    if strategy == "2d":
        return (2, world // 2), ("dp", "tp")
    if strategy in TENSOR_PARALLEL:
        return (world,), ("tp",)
    if strategy.startswith("pp_"):  # experiments/sharded/pipeline.py: one stage per rank (or two)
        return (world,), ("pp",)
    return (world,), ("dp",)


def dp_size(strategy: str, world: int) -> int:
    """Data-parallel shards of the batch's rows (1: every rank takes every row)."""
    if strategy in DATA_PARALLEL:
        return world
    return 2 if strategy == "2d" else 1


def mesh_cannot(strategy: str, world: int) -> str | None:
    """Why the strategy's mesh does not fit this world (2-D: 2 x world/2), or None."""
    if strategy == "2d" and (world < 4 or world % 2):
        return f"2d needs an even world of at least 4 ranks (a 2 x world/2 mesh), not {world}"
    return None


def cannot_run(strategy: str, world: int, width: int, seq: int, batch_size: int) -> str | None:
    """Why ``strategy`` cannot run at this world size and shape (the same on every rank), or None."""
    if strategy.startswith("pp_"):  # no mesh, no split rows: experiments/sharded/pipeline.py's cannot_run
        return None
    if why := mesh_cannot(strategy, world):
        return why
    dp = dp_size(strategy, world)
    if batch_size % dp:
        return f"SHARDED_BATCH={batch_size} does not split into {dp} data-parallel shards"
    tp = world // dp
    if tp > 1 and width % tp:
        return f"SHARDED_WIDTH={width} does not split over {tp} tensor-parallel ranks"
    if strategy == "sp" and seq % world:
        return f"SHARDED_SEQ={seq} does not split over {world} sequence-parallel ranks"
    return None


# --- theory --------------------------------------------------------------------------------------------

ELEM = {"float32": 4, "bfloat16": 2}


def _padded(shape: tuple[int, ...], n: int) -> int:
    """Elements FSDP2 all-gathers for a parameter: dim 0 padded up to a multiple of the shard count."""
    return math.ceil(shape[0] / n) * n * math.prod(shape[1:])


def block_shapes(d: int, tp: int = 1) -> list[tuple[int, ...]]:
    """A block's parameter shapes on one tensor-parallel rank (``tp`` = 1: whole): norm weight and bias,
    up weight and bias (column shards), down weight (row shards) and bias."""
    return [(d,), (d,), (4 * d // tp, d), (4 * d // tp,), (d, 4 * d // tp), (d,)]


def head_shapes(d: int) -> list[tuple[int, ...]]:
    return [(d, d), (d,)]


def n_params(d: int, depth: int) -> int:
    """Parameters of the model: depth x (8d^2 + 7d) + d^2 + d."""
    return sum(math.prod(s) for s in block_shapes(d) * depth + head_shapes(d))


def _fsdp_rows(strategy: str, d: int, depth: int, dp: int, tp: int) -> list[dict]:
    gather_dtype = "bfloat16" if strategy == "fsdp2_bf16" else "float32"
    block = sum(_padded(s, dp) for s in block_shapes(d, tp))
    root = sum(_padded(s, dp) for s in head_shapes(d))
    rows = [
        _row("all_gather", gather_dtype, root * ELEM[gather_dtype], "dp", "forward", 1),
        _row("all_gather", gather_dtype, block * ELEM[gather_dtype], "dp", "forward", depth),
        _row("reduce_scatter", "float32", root * 4, "dp", "backward", 1),
        _row("reduce_scatter", "float32", block * 4, "dp", "backward", depth),
    ]
    if strategy != "fsdp2_keep":  # the blocks are gathered again for backward; the root keeps its own
        rows.append(_row("all_gather", gather_dtype, block * ELEM[gather_dtype], "dp", "backward", depth))
    return rows


def _row(op, dtype, nbytes, group, phase, count) -> dict:
    return {"op": op, "dtype": dtype, "bytes": nbytes, "group": group, "phase": phase, "count": count}


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
    dp = dp_size(strategy, world)
    tp = world // dp
    act = 4 * (batch // dp) * seq * d
    if strategy == "ddp":
        return [_row("all_reduce", "float32", 4 * n_params(d, depth), "dp", "backward", 1)]
    if strategy in ("tp", "tp_wrong_shard"):
        return [_row("all_reduce", "float32", act, "tp", p, depth) for p in ("forward", "backward")]
    if strategy == "sp":
        return [
            _row("all_gather", "float32", act, "tp", "forward", depth + 1),
            _row("reduce_scatter", "float32", act, "tp", "forward", depth),
            _row("all_gather", "float32", act, "tp", "backward", depth),
            _row("reduce_scatter", "float32", act, "tp", "backward", depth),
            _row("all_reduce", "float32", 4 * d, "tp", "optimizer", 2 * depth),
        ]
    rows = _fsdp_rows(strategy, d, depth, dp, tp)
    if strategy == "2d":
        rows += [_row("all_reduce", "float32", act, "tp", p, depth) for p in ("forward", "backward")]
    return rows
