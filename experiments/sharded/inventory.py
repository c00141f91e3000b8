"""The collectives of one training step, and what theory says they should be.

``Inventory`` is a ``CommDebugMode`` (torch.distributed.tensor.debug, public) that also writes down, for
each collective it sees (FSDP2's and DDP's c10d ops and DTensor's functional ones alike): the op, the
dtype, its size S in bytes, the process group by mesh dimension (``dp``, ``tp``; ``world`` for the default
group) and whether it ran in forward or backward (the private bits are in experiments/sharded/internals.py).

S is nccl-tests' size of the collective: the whole buffer of an all_reduce or broadcast, the gathered
output of an all_gather, the full input of a reduce_scatter. A rank sends (n - 1)/n x S for an
all_gather or a reduce_scatter and 2(n - 1)/n x S for an all_reduce (n: the group's size): ``bus_bytes``.
Gloo has no reduce_scatter of its own: it runs an all_reduce of the whole buffer and keeps a slice
(research note sharded_hangs_backends.md §1), so on Gloo a reduce_scatter moves what an all_reduce of S
moves: ``bus_bytes_gloo``.

``theory`` derives the same table from the model's shapes alone (width, depth, sequence, batch, world):
the formulas are in its docstring, and each case records both side by side.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import torch
from torch.distributed.tensor.debug import CommDebugMode
from torch.utils._pytree import tree_flatten

from . import internals

_NAMES = (
    ("reduce_scatter", "reduce_scatter"),
    ("allgather", "all_gather"),
    ("all_gather", "all_gather"),
    ("allreduce", "all_reduce"),
    ("all_reduce", "all_reduce"),
    ("alltoall", "all_to_all"),
    ("all_to_all", "all_to_all"),
    ("broadcast", "broadcast"),
)


def op_name(packet_name: str) -> str:
    """The collective's name from torch's op name (``c10d._allgather_base_`` -> ``all_gather``)."""
    short = packet_name.rsplit(".", 1)[-1]
    return next((name for key, name in _NAMES if key in short), short.strip("_"))


@dataclass(frozen=True, order=True)
class Collective:
    """One collective as the inventory saw it."""

    op: str
    dtype: str
    bytes: int
    """S (module docstring)."""
    group: str
    phase: str
    """forward | backward | optimizer | unknown"""


def size_bytes(op: str, tensors: list[torch.Tensor], ints: list[int]) -> int:
    """S of one collective from its tensor arguments: the sum for an all_reduce or broadcast (a list of
    tensors is one coalesced buffer); the largest tensor for an all_gather (its output) or a reduce_scatter
    (its input); a functional all_gather has only its input, S = input x group size (its int argument)."""
    sizes = [t.numel() * t.element_size() for t in tensors]
    if op in ("all_reduce", "broadcast"):
        return sum(sizes)
    if op == "all_gather" and len(sizes) == 1 and ints:
        return sizes[0] * ints[0]
    return max(sizes, default=0)


class Inventory(CommDebugMode):
    """CommDebugMode that lists every collective (``ops``) with its group named through ``groups``."""

    def __init__(self, groups: dict[str, str]):
        super().__init__()
        self.groups = groups
        self.ops: list[Collective] = []
        self.stage: str | None = None
        """The part of the step running now, as the step marks it (workload.Trainer.mark)."""
        self._known = internals.c10d_collectives()

    def _phase(self) -> str:
        """``optimizer`` while the step says so (e.g. SGD all-reducing a Partial gradient); else CommDebugMode's
        module tracker: backward or forward (the step's own mark where this torch has no tracker)."""
        if self.stage == "optimizer":
            return "optimizer"
        seen = internals.phase(self)
        return self.stage or seen if seen == internals.UNKNOWN else seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if out is NotImplemented:  # a DTensor op: it comes back as its collectives
            return out
        packet = func._overloadpacket
        if packet in self._known or packet in self.comm_registry:
            flat, _ = tree_flatten((args, kwargs or {}))
            op = op_name(str(internals.native_to_legacy(packet)))
            tensors = [a for a in flat if isinstance(a, torch.Tensor)]
            ints = [a for a in flat if isinstance(a, int) and not isinstance(a, bool)]
            names = [g for g in (internals.group_name(a) for a in flat) if g is not None]
            group = self.groups.get(names[-1], names[-1]) if names else internals.UNKNOWN
            dtype = str(max(tensors, key=lambda t: t.numel()).dtype).removeprefix("torch.") if tensors else "none"
            self.ops.append(Collective(op, dtype, size_bytes(op, tensors, ints), group, self._phase()))
        return out


def summarise(ops: list[Collective]) -> list[dict]:
    """The ops of a step as rows: op, dtype, bytes (S of each), group, phase, count; in a fixed order."""
    return [
        {"op": c.op, "dtype": c.dtype, "bytes": c.bytes, "group": c.group, "phase": c.phase, "count": n}
        for c, n in sorted(Counter(ops).items())
    ]


def totals(rows: list[dict]) -> dict[tuple, tuple[int, int]]:
    """(op, dtype, group, phase) -> (count, total S bytes) over rows: how the inventory and the theory are
    compared (the split of one kind into buffers, e.g. DDP's buckets, does not matter)."""
    out: dict[tuple, tuple[int, int]] = {}
    for r in rows:
        k = (r["op"], r["dtype"], r["group"], r["phase"])
        n, b = out.get(k, (0, 0))
        out[k] = (n + r["count"], b + r["count"] * r["bytes"])
    return out


def bus_bytes(rows: list[dict], group_sizes: dict[str, int], *, gloo: bool) -> int:
    """Bytes one rank sends per step (module docstring); ``gloo``: its reduce_scatter as an all_reduce."""
    total = 0.0
    for r in rows:
        n = group_sizes.get(r["group"], 1)
        if r["op"] == "all_reduce" or (gloo and r["op"] == "reduce_scatter"):
            f = 2 * (n - 1) / n
        elif r["op"] in ("all_gather", "reduce_scatter", "all_to_all"):
            f = (n - 1) / n
        else:
            f = 1.0
        total += f * r["bytes"] * r["count"]
    return int(round(total))


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
    dp = 2 if strategy == "2d" else (world if strategy not in ("tp", "sp", "tp_wrong_shard") else 1)
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


def matches(observed: list[dict], expected: list[dict], *, bucketed: bool = False) -> bool:
    """Whether the inventory has theory's counts and bytes per (op, dtype, group, phase); ``bucketed``
    (DDP): the bytes must match, the count is DDP's split into buckets."""
    got, want = totals(observed), totals(expected)
    if bucketed:
        return {k: b for k, (_, b) in got.items()} == {k: b for k, (_, b) in want.items()}
    return got == want


def record_fields(
    rows: list[dict],
    commdebug_ops: int,
    sizes: dict[str, int],
    ddp: list[dict],
    theory: list[dict] | None,
    *,
    bucketed: bool = False,
) -> dict:
    """A step's inventory fields of its record from its rows, the group sizes by mesh dimension, DDP's theory
    on the same model and world and the strategy's theory (None: not modelled, a user model's)."""
    ddp_bus = bus_bytes(ddp, {"dp": sizes["world"]}, gloo=False)
    bus = bus_bytes(rows, sizes, gloo=False)
    return {
        "inventory": rows,
        "inventory_bytes": sum(r["count"] * r["bytes"] for r in rows),
        "inventory_ops": sum(r["count"] for r in rows),
        "commdebug_ops": commdebug_ops,
        "theory": theory,
        "theory_bytes": None if theory is None else sum(r["count"] * r["bytes"] for r in theory),
        "inventory_matches_theory": None if theory is None else matches(rows, theory, bucketed=bucketed),
        "bus_bytes": bus,
        "bus_bytes_gloo": bus_bytes(rows, sizes, gloo=True),
        "ddp_bus_bytes": ddp_bus,
        "bus_vs_ddp": bus / ddp_bus if ddp_bus else None,
    }
