"""Where a sharded step's time goes: the step's compute alone, its communication replayed alone, and from
the two with the step's own time its exposed and hidden communication (issue 26, "Decomposed").

- **Compute alone** (``compute_s``, recorded by the strategy's case): the same strategy, model and batches
  built on process groups of torch's fake backend (experiments/sharded/internals.py ``fake_backend``: its
  collectives return at once and move nothing), DDP with torch's public no-op communication hook
  (``ddp_comm_hooks.debugging_hooks.noop_hook``) in place of its all_reduce, and SGD at learning rate 0, so
  the parameters keep their seeded values while the step does the same arithmetic. Timed by the harness's
  own loop (``Session.baseline``: blocking, the run's iterations, the slowest rank per step, the median).
  What it leaves in: FSDP2's and DTensor's Python bookkeeping around each collective (the copies into and
  out of the gathered buffers, the dispatch); what it leaves out: the transfer and the wait for peers. Its
  work is the step's (its CPU time per step is the real step's within 7% for tp and sp), but where the ranks
  share cores its wall time is not: measured apart from the step, it waits for a core at other times than the
  step did (for tp it can exceed the whole step; the table marks ``~``). The compute the step itself did
  is ``step_compute_s`` below.
- **Communication replayed alone** (the ``replay-<strategy>`` case, its time ``comm_replay_s``): every
  collective of the step's inventory (op, dtype, S bytes, group by mesh dimension, count;
  experiments/sharded/inventory.py) issued on the same process groups, one after another in blocking
  calls, each built by the suite's op table (suite/ops/collectives.py: exact inputs, exact expected
  outputs), so the harness checks the replay like every case (and a planted corruption fails it). Its own
  case, not a second timing inside the step's: one case is one timed thing with one check.
- **Derived** (in the replay's record, beside the step's and the compute's medians it read):
  ``exposed_comm_s`` = max(step - compute, 0), the step's time not spent computing, ``hidden_comm_s`` =
  max(replay - exposed, 0), communication that ran while the step computed, and ``step_compute_s`` =
  max(step - replay, 0), the compute the step did where nothing overlaps (on CPU: what the step model prices
  where the ranks outnumber their cores, suite/model/contention.py). On CPU FSDP2 issues every
  collective synchronously, so little can be hidden there; on GPU streams it is the point of FSDP2.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.distributed as dist

from suite.api import Buffers, CaseFailed, collectives, each, groups

from . import internals, workload
from .strategies import get as strategy_of

EXPERIMENT = "sharded"

VARIANT = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather_into_tensor",
    "reduce_scatter": "reduce_scatter_tensor",
    "all_to_all": "all_to_all_single",
    "broadcast": "broadcast",
}
"""The op table's function that replays each inventoried op (FSDP2 and DTensor call these forms)."""

PROVENANCE = {
    "compute_s": "measured: the same strategy's step on process groups of torch's fake backend (collectives "
    "return at once; DDP: noop_hook; SGD lr 0), the harness's blocking loop, the run's iterations, median of "
    "the slowest rank per step",
    "step_s": "measured: the strategy's train_step case, median of the slowest rank per step",
    "comm_replay_s": "measured: this case's median: every collective of the step's inventory, on its group, "
    "blocking, one after another",
    "exposed_comm_s": "derived: max(step_s - compute_s, 0)",
    "hidden_comm_s": "derived: max(comm_replay_s - exposed_comm_s, 0)",
    "step_compute_s": "derived: max(step_s - comm_replay_s, 0): the compute the step did where its collectives "
    "do not overlap it (CPU)",
    "replay_bytes": "derived: sum of count x S bytes over the replayed collectives (chunked ones rounded down to "
    "a multiple of their group's size)",
}


def step_key(strategy: str, s) -> tuple:
    return (EXPERIMENT, "step", strategy, s.width, s.depth, s.seq, s.batch, s.model)


def inventory_key(strategy: str, s) -> tuple:
    return (EXPERIMENT, "inventory", strategy, s.width, s.depth, s.seq, s.batch, s.model)


def split(step_s: float, compute_s: float, replay_s: float) -> dict:
    """The derived fields of the decomposition (formulas in PROVENANCE)."""
    exposed = max(step_s - compute_s, 0.0)
    return {
        "exposed_comm_s": exposed,
        "hidden_comm_s": max(replay_s - exposed, 0.0),
        "step_compute_s": max(step_s - replay_s, 0.0),
    }


# --- compute alone ---------------------------------------------------------------------------------------


def _fake_mesh_of(ctx, session, mesh_of: Callable, backend: str) -> Callable:
    """A ``mesh_of`` whose mesh has the real one's shape and ranks, each dimension on fake groups."""

    def fake(device_type, shape, names):
        def make():
            from torch.distributed.device_mesh import DeviceMesh

            real = mesh_of(device_type, shape, names)
            timeout = groups.timeout_of(ctx)
            dims = [
                groups.partition_group(real.mesh.transpose(i, -1).reshape(-1, n).tolist(), ctx.rank, backend, timeout)
                for i, n in enumerate(shape)
            ]
            return DeviceMesh.from_group(
                dims if len(dims) > 1 else dims[0], device_type, mesh=real.mesh, mesh_dim_names=names
            )

        return session.once((EXPERIMENT, "fake mesh", device_type, shape, names), make)

    return fake


def compute_trainer(ctx, session, mesh_of: Callable, make: Callable) -> workload.Trainer:
    """The strategy's trainer on fake groups: the step without communication (module docstring). ``make(ctx,
    mesh_of, comm_hook, lr)`` builds the strategy's trainer (the built-in model's or the user's)."""
    from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook

    backend = internals.fake_backend()
    world = session.once(
        (EXPERIMENT, "fake world"),
        lambda: groups.partition_group([list(range(ctx.world_size))], ctx.rank, backend, groups.timeout_of(ctx)),
    )
    fake_ctx = groups.with_group(ctx, world, backend=backend)
    return make(fake_ctx, _fake_mesh_of(ctx, session, mesh_of, backend), noop_hook, 0.0)


def compute_s(strategy: str, s, ctx, session, mesh_of: Callable, make: Callable) -> float:
    """Median seconds of the step without communication (once per session, strategy and model); CaseFailed
    where the fake groups left a parameter non-finite (their outputs unset: the time would be of garbage)."""
    made: list = []

    def make_call():
        trainer = compute_trainer(ctx, session, mesh_of, make)
        made.append(trainer)
        return lambda async_op: trainer.step()

    m = session.baseline((EXPERIMENT, "compute", *step_key(strategy, s)[2:]), ctx, make_call)
    if made:
        finite = all(bool(torch.isfinite(t).all()) for _, t in workload.local_params(made[0].model))
        if not ctx.agree_all(finite):
            raise CaseFailed(
                f"{strategy}: the step on fake process groups left a parameter non-finite on some rank "
                f"(this torch's fake backend does not fill collective outputs; checked with {internals.FAKE_TESTED})"
            )
    return m.median_s


# --- communication replayed alone ------------------------------------------------------------------------


def replay_args(row: dict, group_size: int) -> tuple[collectives.Collective, collectives.Args]:
    """The op-table entry and arguments that replay one inventory row's collective on a group of
    ``group_size`` ranks (the sum for reductions: the op table checks it exactly)."""
    variant = VARIANT.get(row["op"])
    if variant is None:
        raise CaseFailed(f"the inventory has {row['op']!r}, which the replay cannot issue (it knows {sorted(VARIANT)})")
    coll = collectives.BY_VARIANT[variant]
    el = collectives.elsize(row["dtype"])
    count = row["bytes"] // el
    if coll.chunked:
        count = count // group_size * group_size
    return coll, collectives.Args(
        variant=variant,
        dtype=row["dtype"],
        redop="sum" if coll.reduces else None,
        size_bytes=count * el,
        count=count,
        in_place=False,
        root=0 if coll.rooted else -1,
    )


def replay_bytes(rows: list[dict], sizes: dict[str, int]) -> int:
    """S bytes the replay of ``rows`` moves (``sizes``: group name -> ranks)."""
    return sum(r["count"] * replay_args(r, sizes[r["group"]])[1].size_bytes for r in rows)


def joined(parts: list[Buffers]) -> Buffers:
    """One buffer set that issues ``parts`` one after another: checked, reset and corrupted as one."""
    return Buffers(
        call=lambda async_op: [p.call(async_op) for p in parts],
        check=lambda: sum(p.check() for p in parts if p.check is not None),
        outputs=lambda: [t for p in parts for t in p.outputs()],
        reset=each(p.reset for p in parts),
        before_sample=each(p.before_sample for p in parts),
    )


def replay_buffers(rows: list[dict], ctx, group_of: Callable[[str], object]) -> Buffers:
    """Every collective of ``rows`` (an inventory), ``count`` times each with its own buffers, on the group
    ``group_of(name)`` of its mesh dimension. Each call's values start where the previous call's ended
    (``Args.start``): identical calls carry different data, so a replay that hands one call's result to
    another, or one result twice, is wrong."""
    parts, start = [], 0
    for row in rows:
        group = group_of(row["group"])
        ranks = dist.get_process_group_ranks(group)
        sub = groups.sub_context(ctx, ranks, group)
        coll, a = replay_args(row, len(ranks))
        for _ in range(row["count"]):
            parts.append(coll.build(dataclasses.replace(a, start=start), sub))
            start += a.count
    return joined(parts)


def group_of(strategy: str, ctx, mesh_of: Callable) -> Callable[[str], object]:
    """Mesh-dimension name (as the inventory writes it) -> the strategy's process group."""

    def find(name: str):
        if name == "world" or strategy_of(strategy).ddp:  # DDP runs on the run's group, no mesh
            return ctx.group
        shape, names = workload.mesh_shape(strategy, ctx.world_size)
        if name not in names:
            raise CaseFailed(f"{strategy}: the inventory names group {name!r}, not one of its mesh's {names}")
        return mesh_of(ctx.device.type, shape, names).get_group(name)

    return find


def replay_build(
    strategy: str, s, ctx, session, mesh_of: Callable, rows_of: Callable, step_of: Callable, make: Callable
) -> Buffers:
    """The replay case's buffer set; its ``derive`` reads the step's median (``step_of()``, a Measurement) and
    the compute's (``make``: compute_trainer's), and derives the split."""
    rows = rows_of()
    find = group_of(strategy, ctx, mesh_of)
    b = replay_buffers(rows, ctx, find)
    sizes = {r["group"]: dist.get_world_size(find(r["group"])) for r in rows}

    def derive(m, around, session) -> dict:
        step = step_of().median_s
        compute = compute_s(strategy, s, ctx, session, mesh_of, make)
        out = {"step_s": step, "compute_s": compute, "comm_replay_s": m.median_s}
        return out | split(step, compute, m.median_s) | {"replay_bytes": replay_bytes(rows, sizes), "replayed": rows}

    b.derive = derive
    return b
