"""The op table: every ``torch.distributed`` function the suite times or journals, one row (``Op``) each, and the
bus-bandwidth families the rows belong to (``Family``), with what the offline models know of each family
(``Model``). Every other list of ops is read from here:

- the journal's wrappers (suite/harness/journal/wrap.py: a function without a row is not journaled) and the codes
  of its ring file (suite/common/journal_ring.py);
- the planted faults (suite/harness/plant/mode.py: the c10d op a row issues is the one a fault applies to);
- the MPI group's op methods and what their watchers are told (suite/harness/mpi/watch.py);
- the bus-bandwidth factor and the ring's latency steps (suite/metrics.py ``OP_TABLE``);
- the algorithm models (suite/model/algorithms.py, backend_choice.py, runs.py, validate.py).

Names and plain data only (no torch): the launcher and the offline models read it too. Where torch is there, a
row's function is ``getattr(torch.distributed, op.name)``. Adding a function is one row here plus its builder in
suite/ops/ (CONTRIBUTING.md, "Adding a collective op"); tests/unit/test_op_table.py holds every column to its
reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Model:
    """What suite/model/ models of a family (docstring of suite.model: the derivation and source of each)."""

    gloo: tuple[str, str]
    """The algorithm Gloo runs for it, and where that is read (its sources, torch's ProcessGroupGloo.cpp)."""
    nccl: str | None = None
    """Its name in NCCL's debug lines (TUNING/COLL); None: NCCL prints none for it."""
    fitted: str
    """The row whose records the link fits read (the tensor form nccl-tests and FSDP use)."""
    ring: bool = False
    """Modelled by a ring and by recursive halving/doubling (all_to_all: pairwise; barrier: no bytes)."""
    halving_doubling: tuple[str, ...] = ()
    """The phases of its halving/doubling model, in order: ``halving`` (a reduce-scatter), ``doubling`` (an
    all-gather), ``binomial_scatter`` (halves of the buffer down a binomial tree)."""
    fold: Callable[[float, int], tuple[float, ...]] | None = None
    """What an extra rank of a folded halving/doubling (n not a power of two) sends in before and receives after,
    from the buffer S and n (Thakur et al. 2005 §4)."""
    target: bool = False
    """``make validate-predict`` holds its bandwidth-bound predictions to the target (suite/model/validate.py)."""


@dataclass(frozen=True, kw_only=True)
class Family:
    """Ops that move the same bytes the same way: one bus-bandwidth factor (nccl-tests) and one ring."""

    name: str
    busbw_factor: Callable[[int], float]
    """nccl-tests' factor from algbw to busbw at n ranks (suite/metrics.py's docstring)."""
    ring_latency_steps: Callable[[int], float] | None
    """The ring algorithm's sequential latency steps at n ranks (suite/model/fit.py); None: unmodelled."""
    model: Model | None = None
    """None: no offline model (``make predict`` leaves it out)."""


@dataclass(frozen=True, kw_only=True)
class Op:
    """One ``torch.distributed`` function."""

    name: str
    """The function's name in ``torch.distributed``."""
    family: str
    """Its ``Family``: the bus-bandwidth factor of its records, its model."""
    code: int
    """Its number in a journal ring file (suite/common/journal_ring.py). Files outlive the code that wrote
    them: a row keeps its number, and a new row takes a new one."""
    group_at: int
    """Where its ``group`` argument is, by position (the journal reads it)."""
    async_at: int | None = None
    """Where its ``async_op`` argument is; None: it has none."""
    peer: str | None = None
    """A point-to-point op's peer keyword (``dst``, ``src``); None: a collective."""
    issues: bool = False
    """It returns once issued (isend, irecv): its Work completes later."""
    objects: bool = False
    """It moves pickled objects with sends or receives of its own (torch's, not the wrapped ones)."""
    c10d: str | None = None
    """The c10d op it issues (``torch.ops.c10d.<name>``): the one a planted fault applies to
    (suite/harness/plant/mode.py); None: no fault applies to it (a barrier moves no data; an object list's
    inner sends and receives are ops of the rows send and recv)."""
    reduces: bool = False
    """It reduces: the planted ``wrong_reduction`` applies to it."""
    mpi: str | None = None
    """The method of the MPI group (suite/harness/mpi/group.py ``MpiGroup``) that carries it; None: none."""
    renamed_to: str | None = None
    """The row torch (2.13) renamed it to: the suite calls the new function under this name where torch has it."""

    @property
    def watched_as(self) -> str:
        """The collective's name the MPI group's watchers are told (the sharded inventory's): its family; a p2p
        op's MPI method (send, recv)."""
        return self.family if self.peer is None or self.mpi is None else self.mpi


def _ring_n(n: int) -> float:
    return float(n - 1)


def _chunked(n: int) -> float:
    return (n - 1) / n


FAMILIES: tuple[Family, ...] = (
    Family(
        name="all_reduce",
        busbw_factor=lambda n: 2.0 * (n - 1) / n,
        ring_latency_steps=lambda n: 2.0 * (n - 1),
        model=Model(
            gloo=(
                "ring",
                "gloo/allreduce.cc: AllreduceOptions UNSPECIFIED -> ring (reduce-scatter + all-gather "
                "ring in >= 2 segments per chunk); torch's ProcessGroupGloo allreduce calls gloo::allreduce",
            ),
            nccl="allreduce",
            fitted="all_reduce",
            ring=True,
            halving_doubling=("halving", "doubling"),
            fold=lambda s, n: (s, s),
            target=True,
        ),
    ),
    Family(
        name="all_gather",
        busbw_factor=_chunked,
        ring_latency_steps=_ring_n,
        model=Model(
            gloo=(
                "ring",
                "gloo/allgather.cc: ring, 2(n-1) half-chunk steps (allgather_into_tensor -> "
                "allgather_coalesced -> gloo::allgather)",
            ),
            nccl="allgather",
            fitted="all_gather_into_tensor",
            ring=True,
            halving_doubling=("doubling",),
            fold=lambda s, n: (s / n, s),
            target=True,
        ),
    ),
    Family(
        name="reduce_scatter",
        busbw_factor=_chunked,
        ring_latency_steps=_ring_n,
        model=Model(
            gloo=(
                "allreduce_slice",
                "torch ProcessGroupGloo reduce_scatter_tensor: all_reduce of a clone of "
                "the whole input, then the rank's chunk copied out",
            ),
            nccl="reducescatter",
            fitted="reduce_scatter_tensor",
            ring=True,
            halving_doubling=("halving",),
            fold=lambda s, n: (s, s / n),
            target=True,
        ),
    ),
    Family(
        name="broadcast",
        busbw_factor=lambda n: 1.0,
        ring_latency_steps=_ring_n,
        model=Model(
            gloo=(
                "posted_tree",
                "gloo/broadcast.cc: binomial tree, the whole buffer per hop; each rank posts all its "
                "sends at once and waits for them at the end, so they share its link",
            ),
            nccl="broadcast",
            fitted="broadcast",
            ring=True,
            halving_doubling=("binomial_scatter", "doubling"),
            fold=lambda s, n: (s,),
            target=True,
        ),
    ),
    Family(
        name="all_to_all",
        busbw_factor=_chunked,
        ring_latency_steps=_ring_n,
        model=Model(
            gloo=("pairwise", "gloo/alltoall.cc: every peer's chunk sent directly (all posted at once)"),
            nccl="alltoall",
            fitted="all_to_all_single",
        ),
    ),
    Family(
        name="barrier",
        busbw_factor=lambda n: 0.0,
        ring_latency_steps=None,
        model=Model(
            gloo=("dissemination", "gloo/barrier.cc: dissemination barrier (Hensgen, Finkel, Manber 1988)"),
            fitted="barrier",
        ),
    ),
    Family(name="gather", busbw_factor=_chunked, ring_latency_steps=_ring_n),
    Family(name="scatter", busbw_factor=_chunked, ring_latency_steps=_ring_n),
    Family(name="reduce", busbw_factor=lambda n: 1.0, ring_latency_steps=_ring_n),
    Family(name="send_recv", busbw_factor=lambda n: 1.0, ring_latency_steps=lambda n: 1.0),
)
"""The families; the modelled ones first, in the order of the models' tables."""

_AG, _RS = "_allgather_base_", "_reduce_scatter_base_"
OPS: tuple[Op, ...] = (
    Op(
        name="all_reduce",
        family="all_reduce",
        code=0,
        group_at=2,
        async_at=3,
        c10d="allreduce_",
        reduces=True,
        mpi="allreduce",
    ),
    Op(name="broadcast", family="broadcast", code=1, group_at=2, async_at=3, c10d="broadcast_", mpi="broadcast"),
    Op(name="all_gather", family="all_gather", code=2, group_at=2, async_at=3, c10d="allgather_", mpi="allgather"),
    Op(
        name="all_gather_into_tensor",
        family="all_gather",
        code=3,
        group_at=2,
        async_at=3,
        c10d=_AG,
        mpi="all_gather_single",
        renamed_to="all_gather_single",
    ),
    Op(
        name="all_gather_single", family="all_gather", code=4, group_at=2, async_at=3, c10d=_AG, mpi="all_gather_single"
    ),
    Op(name="all_to_all", family="all_to_all", code=5, group_at=2, async_at=3, c10d="alltoall_", mpi="alltoall"),
    Op(name="reduce", family="reduce", code=6, group_at=3, async_at=4, c10d="reduce_", reduces=True, mpi="reduce"),
    Op(
        name="reduce_scatter",
        family="reduce_scatter",
        code=7,
        group_at=3,
        async_at=4,
        c10d="reduce_scatter_",
        reduces=True,
        mpi="reduce_scatter",
    ),
    Op(
        name="reduce_scatter_tensor",
        family="reduce_scatter",
        code=8,
        group_at=3,
        async_at=4,
        c10d=_RS,
        reduces=True,
        mpi="reduce_scatter_single",
        renamed_to="reduce_scatter_single",
    ),
    Op(
        name="reduce_scatter_single",
        family="reduce_scatter",
        code=9,
        group_at=3,
        async_at=4,
        c10d=_RS,
        reduces=True,
        mpi="reduce_scatter_single",
    ),
    Op(name="gather", family="gather", code=10, group_at=3, async_at=4, c10d="gather_", mpi="gather"),
    Op(name="scatter", family="scatter", code=11, group_at=3, async_at=4, c10d="scatter_", mpi="scatter"),
    Op(
        name="all_to_all_single",
        family="all_to_all",
        code=12,
        group_at=4,
        async_at=5,
        c10d="alltoall_base_",
        mpi="all_to_all_single",
    ),
    Op(name="barrier", family="barrier", code=13, group_at=0, async_at=1, mpi="barrier"),
    Op(name="send", family="send_recv", code=14, group_at=2, peer="dst", c10d="send", mpi="send"),
    Op(name="recv", family="send_recv", code=15, group_at=2, peer="src", c10d="recv_", mpi="recv"),
    Op(name="isend", family="send_recv", code=16, group_at=2, peer="dst", issues=True, c10d="send", mpi="send"),
    Op(name="irecv", family="send_recv", code=17, group_at=2, peer="src", issues=True, c10d="recv_", mpi="recv"),
    Op(name="send_object_list", family="send_recv", code=18, group_at=2, peer="dst", objects=True),
    Op(name="recv_object_list", family="send_recv", code=19, group_at=2, peer="src", objects=True),
)
"""The rows, in the order of their journal codes."""

BY_NAME: dict[str, Op] = {op.name: op for op in OPS}
FAMILY: dict[str, Family] = {f.name: f for f in FAMILIES}
MODELLED: tuple[Family, ...] = tuple(f for f in FAMILIES if f.model is not None)
"""The families suite/model/ models, in the order of its tables."""
P2P: frozenset[str] = frozenset(op.name for op in OPS if op.peer is not None)
"""The point-to-point rows (the object lists' included)."""


def of_family(family: str) -> frozenset[str]:
    """The rows of ``family``."""
    return frozenset(op.name for op in OPS if op.family == family)
