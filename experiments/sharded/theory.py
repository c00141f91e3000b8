"""The built-in model's shapes and the row builders of its strategies' theory (pure: no torch, no strategy
names): the parameter shapes, and the collectives of one step per parallelism (DDP, FSDP2, TP, SP) from them. Each
strategy file (experiments/sharded/strategies/) composes its ``theory`` from these; shapes.py answers by name.
"""

from __future__ import annotations

import math

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


def fsdp_theory(*, reshard: bool, gather_dtype: str = "float32"):
    """``theory`` of FSDP2 (on the dp dimension of ``dp`` shards, the world by default): forward all_gather of the
    root and of every block, backward reduce_scatter of each unit's float32 gradient, and with ``reshard`` every
    block gathered again in backward (the root keeps its own); each unit's bytes its parameters on one tp rank with
    dim 0 padded to a multiple of ``dp``, in ``gather_dtype``."""

    def rows(d: int, depth: int, seq: int, batch: int, world: int, dp: int | None = None) -> list[dict]:
        dp = world if dp is None else dp
        tp = world // dp
        block = sum(_padded(s, dp) for s in block_shapes(d, tp))
        root = sum(_padded(s, dp) for s in head_shapes(d))
        size = ELEM[gather_dtype]
        out = [
            _row("all_gather", gather_dtype, root * size, "dp", "forward", 1),
            _row("all_gather", gather_dtype, block * size, "dp", "forward", depth),
            _row("reduce_scatter", "float32", root * 4, "dp", "backward", 1),
            _row("reduce_scatter", "float32", block * 4, "dp", "backward", depth),
        ]
        if reshard:  # the blocks are gathered again for backward; the root keeps its own
            out.append(_row("all_gather", gather_dtype, block * size, "dp", "backward", depth))
        return out

    return rows


def ddp_rows(d: int, depth: int, seq: int, batch: int, world: int) -> list[dict]:
    """DDP: all_reduce of the 4P gradient bytes in backward (its buckets split it; one when it fits the first)."""
    return [_row("all_reduce", "float32", 4 * n_params(d, depth), "dp", "backward", 1)]


def tp_rows(d: int, depth: int, seq: int, batch: int, world: int, dp: int = 1) -> list[dict]:
    """TP: per block one all_reduce of A in forward (the row-parallel output) and one in backward (the
    column-parallel input's gradient), on the tp group; A of ``batch / dp`` rows."""
    act = 4 * (batch // dp) * seq * d
    return [_row("all_reduce", "float32", act, "tp", p, depth) for p in ("forward", "backward")]


def sp_rows(d: int, depth: int, seq: int, batch: int, world: int) -> list[dict]:
    """SP: per block an all_gather (the sequence before ``up``) and a reduce_scatter (``down``'s output) of A in
    forward and the same pair in backward, the LayerNorm gradients all-reduced by the SGD step, one all_gather of
    A before the head."""
    act = 4 * batch * seq * d
    return [
        _row("all_gather", "float32", act, "tp", "forward", depth + 1),
        _row("reduce_scatter", "float32", act, "tp", "forward", depth),
        _row("all_gather", "float32", act, "tp", "backward", depth),
        _row("reduce_scatter", "float32", act, "tp", "backward", depth),
        _row("all_reduce", "float32", 4 * d, "tp", "optimizer", 2 * depth),
    ]


def _row(op, dtype, nbytes, group, phase, count) -> dict:
    return {"op": op, "dtype": dtype, "bytes": nbytes, "group": group, "phase": phase, "count": count}
