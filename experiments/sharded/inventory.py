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

``theory`` (experiments/sharded/shapes.py, torch-free; importable from here too) derives the same table from the
model's shapes alone (width, depth, sequence, batch, world): the formulas are in its docstring, and each case
records both side by side.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
from torch.distributed.tensor.debug import CommDebugMode

from suite.api import CaseFailed

from . import internals, quiet
from .shapes import dp_size, n_params, theory  # noqa: F401  (pure: shapes.py; the old names stay importable)

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

    def __enter__(self):
        """Also watch the groups whose ops never reach the dispatcher (a Python process group: BACKEND=mpi)."""
        self._watched = internals.python_groups(self.groups)
        for name, group in self._watched.items():
            group.watchers.append(self._watcher(name))
        return super().__enter__()

    def __exit__(self, *exc):
        for group in self._watched.values():
            group.watchers.clear()
        return super().__exit__(*exc)

    def _watcher(self, name: str):
        def watch(op: str, tensors: list) -> None:
            if op == "barrier":  # as on a C++ backend: CommDebugMode does not list barriers
                return
            dtype = str(max(tensors, key=lambda t: t.numel()).dtype).removeprefix("torch.") if tensors else "none"
            self.ops.append(Collective(op, dtype, size_bytes(op, tensors, []), self.groups[name], self._phase()))

        return watch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if out is NotImplemented:  # a DTensor op: it comes back as its collectives
            return out
        packet = internals.packet(func)
        if packet in self._known or packet in self.comm_registry:
            flat = internals.leaves(args, kwargs)
            op = op_name(str(internals.native_to_legacy(packet)))
            tensors = [a for a in flat if isinstance(a, torch.Tensor)]
            ints = [a for a in flat if isinstance(a, int) and not isinstance(a, bool)]
            names = [g for g in (internals.group_name(a) for a in flat) if g is not None]
            group = self.groups.get(names[-1], names[-1]) if names else internals.UNKNOWN
            dtype = str(max(tensors, key=lambda t: t.numel()).dtype).removeprefix("torch.") if tensors else "none"
            self.ops.append(Collective(op, dtype, size_bytes(op, tensors, ints), group, self._phase()))
        return out


def issued(before: dict, after: dict, labels: dict[str, str]) -> dict[str, int] | None:
    """Ops c10d counted on each mesh dimension between two readings of its sequence numbers (group name ->
    count, ``internals.c10d_issued``); ``labels``: group name -> mesh dimension. None where c10d could not
    say for some group (nothing to compare with)."""
    if any(before.get(n) is None or after.get(n) is None for n in labels):
        return None
    return {labels[n]: after[n] - before[n] for n in labels}


def unseen(rows: list[dict], c10d: dict[str, int] | None, *, at_most: bool = False) -> list[str]:
    """Per mesh dimension where the inventory (``rows``) and c10d's own count (``issued``) differ, one phrase
    saying so; empty when they agree or c10d could not say. CommDebugMode sees the ops dispatched on its own
    thread; c10d counts every op on the group: a collective issued from another thread, or a barrier, is in
    the second only (measured on torch 2.13 with Gloo). ``at_most``: only c10d counting more than the
    inventory is a difference (a pipeline's p2p ops: NCCL's sequence number counts collectives only)."""
    if c10d is None:
        return []
    seen: dict[str, int] = {}
    for r in rows:
        seen[r["group"]] = seen.get(r["group"], 0) + r["count"]
    return [
        f"{g}: c10d issued {c10d.get(g, 0)}, the inventory saw {seen.get(g, 0)}"
        for g in sorted(set(c10d) | set(seen))
        if c10d.get(g, 0) > seen.get(g, 0) or (not at_most and c10d.get(g, 0) != seen.get(g, 0))
    ]


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


def matches(observed: list[dict], expected: list[dict], *, bucketed: bool = False) -> bool:
    """Whether the inventory has theory's counts and bytes per (op, dtype, group, phase); ``bucketed``
    (DDP): the bytes must match, the count is DDP's split into buckets."""
    got, want = totals(observed), totals(expected)
    if bucketed:
        return {k: b for k, (_, b) in got.items()} == {k: b for k, (_, b) in want.items()}
    return got == want


def group_sizes(strategy: str, world: int) -> dict[str, int]:
    """Ranks in each group the inventory names (mesh dimensions and the world) under ``strategy``."""
    dp = dp_size(strategy, world)
    return {"dp": dp, "tp": world // dp, "world": world}


def record_fields(
    rows: list[dict],
    commdebug_ops: int,
    sizes: dict[str, int],
    ddp: list[dict],
    expected: list[dict] | None,
    *,
    bucketed: bool = False,
) -> dict:
    """A step's inventory fields of its record from its rows, the group sizes by mesh dimension, DDP's theory
    on the same model and world and the strategy's theory, ``expected`` (None: not modelled, a user model's)."""
    ddp_bus = bus_bytes(ddp, {"dp": sizes["world"]}, gloo=False)
    bus = bus_bytes(rows, sizes, gloo=False)
    return {
        "inventory": rows,
        "inventory_bytes": sum(r["count"] * r["bytes"] for r in rows),
        "inventory_ops": sum(r["count"] for r in rows),
        "commdebug_ops": commdebug_ops,
        "theory": expected,
        "theory_bytes": None if expected is None else sum(r["count"] * r["bytes"] for r in expected),
        "inventory_matches_theory": None if expected is None else matches(rows, expected, bucketed=bucketed),
        "bus_bytes": bus,
        "bus_bytes_gloo": bus_bytes(rows, sizes, gloo=True),
        "ddp_bus_bytes": ddp_bus,
        "bus_vs_ddp": bus / ddp_bus if ddp_bus else None,
    }


def step_inventory(trainer) -> tuple[list[dict], int, dict[str, int] | None]:
    """One more step under the inventory (after DDP's bucket rebuild, which its second step does): its rows,
    CommDebugMode's own count, and c10d's count per mesh dimension over the same step (inventory.issued). The
    warnings torch raises for CommDebugMode's hooks in that step are filtered, ``trainer.warned`` naming them
    (experiments/sharded/quiet.py)."""
    while trainer.steps < 2:
        trainer.step()
    before = internals.c10d_issued(trainer.groups)
    with quiet.filtered(trainer.warned), Inventory(trainer.groups) as inv:
        trainer.mark = lambda stage: setattr(inv, "stage", stage)
        try:
            trainer.step()
        finally:
            trainer.mark = lambda stage: None
    c10d = issued(before, internals.c10d_issued(trainer.groups), trainer.groups)
    return summarise(inv.ops), int(inv.get_total_counts()), c10d


def complete(strategy: str, rows: list[dict], c10d: dict | None, ctx, *, at_most: bool = False) -> None:
    """CaseFailed on every rank when on any rank c10d counted ops the inventory did not see: its bytes, the
    theory it is compared with and the replay would all leave them out (``at_most``: as ``unseen``)."""
    missed = unseen(rows, c10d, at_most=at_most)
    if not ctx.agree_all(not missed):
        raise CaseFailed(
            f"{strategy}: the step issued collectives its inventory did not see "
            f"({'; '.join(missed) if missed else 'on another rank'}): an op from another thread or a barrier "
            "escapes CommDebugMode, so the recorded bytes, theory check and replay would leave it out"
        )
