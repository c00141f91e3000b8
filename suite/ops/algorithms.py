"""Hand-written all_reduce algorithms, built from torch.distributed primitives.

They exist to explain the backends' numbers, not to replace them:

- ``ring_all_reduce``: the ring algorithm with point-to-point ops only
  (``batch_isend_irecv``): a reduce-scatter phase of n-1 steps, after which
  every rank owns one fully reduced chunk of S/n bytes, then an all-gather
  phase of n-1 steps that circulates the reduced chunks. Every rank sends
  (and receives) 2(n-1) chunks of S/n bytes = 2(n-1)/n * S, which is exactly
  the all_reduce bus-bandwidth factor of nccl-tests (doc/PERFORMANCE.md;
  Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
  workstations", JPDC 2009).
- ``naive_all_reduce``: ``reduce`` to one root, then ``broadcast`` from it;
  in a flat implementation the root receives and sends (n-1) * S bytes, so it
  does not scale with n.
- ``hierarchical_all_reduce``: reduce inside each node, all_reduce among
  one leader per node, broadcast inside each node (the two-level scheme of
  Horovod's hierarchical allreduce and NCCL's tree/ring split between
  intra- and inter-node links). Its groups come from ``build_hierarchy``,
  which every rank must call in the same order (``new_group`` is collective).

All operate in place on a contiguous tensor and are exact for the suite's
integer patterns whatever the summation order.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from suite.harness import groups
from suite.ops.collectives import REDUCE_OP

REDOPS = ("sum", "product", "min", "max")


def _combine(acc: torch.Tensor, other: torch.Tensor, redop: str) -> None:
    if redop == "sum":
        acc.add_(other)
    elif redop == "product":
        acc.mul_(other)
    elif redop == "min":
        torch.minimum(acc, other, out=acc)
    elif redop == "max":
        torch.maximum(acc, other, out=acc)
    else:
        raise ValueError(f"unknown reduce op {redop!r}; choose from {', '.join(REDOPS)}")


ORDERINGS = ("send_recv_parity", "isend_irecv", "batch_isend_irecv")
"""The ways to swap data with peers that cannot deadlock (a blocking send on both sides can)."""


def exchange(
    send: torch.Tensor | None,
    recv: torch.Tensor | None,
    dst: int,
    src: int,
    group=None,
    ordering: str = "batch_isend_irecv",
    *,
    wait: bool = True,
):
    """Send ``send`` to group rank ``dst`` while receiving ``recv`` from group rank ``src``.

    ``ordering``: ``batch_isend_irecv`` (both in one batch), ``isend_irecv`` (two async ops), or
    ``send_recv_parity`` (blocking ``send``/``recv``; even ranks send first, odd ranks receive
    first, so every blocking send meets a posted recv, also in an odd ring: ranks n-1 and 0, both
    even, are resolved by rank 0 finishing its send to odd rank 1 first). Empty (or None) tensors
    are neither sent nor received: in a ring the chunk a rank sends is the one its neighbour
    receives, so both ends agree. ``wait=False`` returns the async works instead of waiting (the
    blocking ordering has none).
    """
    send = send if send is not None and send.numel() else None
    recv = recv if recv is not None and recv.numel() else None
    if ordering == "send_recv_parity":
        me = dist.get_rank(group)
        steps = [
            lambda: dist.send(send, group=group, group_dst=dst) if send is not None else None,
            lambda: dist.recv(recv, group=group, group_src=src) if recv is not None else None,
        ]
        for step in steps if me % 2 == 0 else steps[::-1]:
            step()
        return []
    if ordering == "isend_irecv":
        works = ([dist.irecv(recv, group=group, group_src=src)] if recv is not None else []) + (
            [dist.isend(send, group=group, group_dst=dst)] if send is not None else []
        )
    elif ordering == "batch_isend_irecv":
        ops = ([dist.P2POp(dist.isend, send, group=group, group_peer=dst)] if send is not None else []) + (
            [dist.P2POp(dist.irecv, recv, group=group, group_peer=src)] if recv is not None else []
        )
        works = dist.batch_isend_irecv(ops) if ops else []
    else:
        raise ValueError(f"unknown ordering {ordering!r}; choose from {', '.join(ORDERINGS)}")
    if not wait:
        return works
    for w in works:
        w.wait()
    return []


def ring_chunks(numel: int, n: int) -> list[tuple[int, int]]:
    """(offset, length) of the n ring chunks of a ``numel`` buffer (torch.tensor_split sizes)."""
    base, extra = divmod(numel, n)
    out, off = [], 0
    for i in range(n):
        ln = base + (1 if i < extra else 0)
        out.append((off, ln))
        off += ln
    return out


def ring_bytes_sent_per_rank(size_bytes: int, n: int) -> float:
    """Bytes each rank sends in a ring all_reduce of ``size_bytes``: 2(n-1)/n * S."""
    return 2.0 * (n - 1) / n * size_bytes


def ring_all_reduce(t: torch.Tensor, group=None, redop: str = "sum") -> None:
    """In-place all_reduce of ``t`` over ``group`` with p2p ops only (ring algorithm)."""
    if not t.is_contiguous():
        raise ValueError("ring_all_reduce needs a contiguous tensor")
    n = dist.get_world_size(group)
    if n == 1:
        return
    me = dist.get_rank(group)
    flat = t.view(-1)
    chunks = [flat.narrow(0, off, ln) for off, ln in ring_chunks(flat.numel(), n)]
    right, left = (me + 1) % n, (me - 1) % n
    scratch = torch.empty(chunks[0].numel(), dtype=t.dtype, device=t.device)
    # Reduce-scatter: at step s send chunk (me-s), receive chunk (me-s-1) from the
    # left neighbour and fold it in. After n-1 steps chunk (me+1) % n is complete here.
    for s in range(n - 1):
        send_i, recv_i = (me - s) % n, (me - s - 1) % n
        buf = scratch.narrow(0, 0, chunks[recv_i].numel())
        exchange(chunks[send_i], buf, right, left, group)
        if buf.numel():
            _combine(chunks[recv_i], buf, redop)
    # All-gather: pass the complete chunks around; step s sends chunk (me+1-s),
    # receives chunk (me-s) straight into place.
    for s in range(n - 1):
        send_i, recv_i = (me + 1 - s) % n, (me - s) % n
        exchange(chunks[send_i], chunks[recv_i], right, left, group)


def naive_all_reduce(t: torch.Tensor, group=None, redop: str = "sum", root: int = 0) -> None:
    """In-place all_reduce as ``reduce`` to group rank ``root`` then ``broadcast`` from it."""
    dist.reduce(t, op=REDUCE_OP[redop], group=group, group_dst=root)
    dist.broadcast(t, group=group, group_src=root)


def node_layout(hostnames: Sequence[str], fake_nodes: int = 0) -> tuple[int, ...]:
    """Node index of every rank.

    From the hostnames (order of first appearance, as ``DistContext.node_of``),
    or, with ``fake_nodes`` = k > 0, k contiguous blocks of ranks (rank r is on
    node r*k // n). The fake layout only changes how ranks are *grouped*; the
    traffic still takes whatever path the real hosts have.
    """
    n = len(hostnames)
    if fake_nodes:
        if not 1 <= fake_nodes <= n:
            raise ValueError(f"fake node count must be in 1..{n} (the world size), got {fake_nodes}")
        return tuple(r * fake_nodes // n for r in range(n))
    order: list[str] = []
    for h in hostnames:
        if h not in order:
            order.append(h)
    return tuple(order.index(h) for h in hostnames)


def ranks_by_node(layout: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Global ranks of each node, nodes in index order, ranks ascending."""
    nodes: dict[int, list[int]] = {}
    for rank, node in enumerate(layout):
        nodes.setdefault(node, []).append(rank)
    return tuple(tuple(nodes[k]) for k in sorted(nodes))


@dataclass(frozen=True, kw_only=True)
class Hierarchy:
    """The groups of a two-level all_reduce, as seen from one rank."""

    nodes: tuple[tuple[int, ...], ...]
    """Global ranks per node; the first of each is the node's leader."""
    node: int
    """This rank's node index."""
    intra: object
    """Process group of this rank's node."""
    leaders: object | None
    """Process group of the node leaders; None on ranks that are not leaders."""

    @property
    def is_leader(self) -> bool:
        return self.leaders is not None


def build_hierarchy(
    layout: Sequence[int], rank: int, backend: str | None = None, timeout: datetime.timedelta | None = None
) -> Hierarchy:
    """Create the intra-node groups and the leaders' group. Collective: every rank
    of the world must call it with the same ``layout``, in the same order relative
    to other ``new_group`` calls. Pass ``timeout``: without it a new group waits
    torch's default of 30 minutes for a missing peer."""
    nodes = ranks_by_node(layout)
    intra, leaders = groups.node_groups(nodes, rank, backend=backend, timeout=timeout)
    return Hierarchy(nodes=nodes, node=layout[rank], intra=intra, leaders=leaders)


HIERARCHY_SHAPES = {
    "hierarchical": "two levels: intra-node reduce, all_reduce among the node leaders, intra-node broadcast",
    "reduce_broadcast": "one node: reduce to its leader + broadcast from it (the leaders' all_reduce has one "
    "rank); not hierarchical",
    "leaders_all_reduce": "one rank per node: the leaders' all_reduce alone (the intra-node steps have one rank); "
    "a flat all_reduce, not hierarchical",
}
"""What ``hierarchical_all_reduce`` amounts to, by the shape of the nodes (``hierarchy_shape``)."""


def hierarchy_shape(nodes: Sequence[Sequence[int]]) -> str:
    """The key of ``HIERARCHY_SHAPES`` that names what the two-level all_reduce does on ``nodes``
    (global ranks per node): only several nodes, one of them with several ranks, make two levels."""
    if len(nodes) == 1:
        return "reduce_broadcast"
    if all(len(ranks) == 1 for ranks in nodes):
        return "leaders_all_reduce"
    return "hierarchical"


def hierarchical_all_reduce(t: torch.Tensor, h: Hierarchy, redop: str = "sum") -> None:
    """In-place all_reduce: intra-node reduce to the leader, all_reduce among the
    leaders, intra-node broadcast from the leader."""
    op = REDUCE_OP[redop]
    dist.reduce(t, op=op, group=h.intra, group_dst=0)
    if h.is_leader:
        dist.all_reduce(t, op=op, group=h.leaders)
    dist.broadcast(t, group=h.intra, group_src=0)
