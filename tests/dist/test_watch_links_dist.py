"""The watch's link probe (suite/watch/links.py) on three real Gloo ranks, two "nodes" (node0: ranks 0 and 1, node1:
rank 2): only the leaders send, the rank that leads nothing takes part in the sum alone, every rank holds the same
table, and a node whose egress is slow (its rank's ``send`` planted to take a 10 MB/s link's time for its bytes, as
a node's rate cut delays what it sends: the probe's 256 KiB by 26 ms, its 4-byte replies by nothing) is the one
named. About 3 s."""

from __future__ import annotations

import time

import torch.multiprocessing as mp

from suite.watch import links
from tests.dist.local_group import gloo_rank

NODES = {"node0": (0, 1), "node1": (2,)}
RATE = 10e6
"""node1's egress, bytes/s."""


def _rank(rank: int, store: str, out) -> None:
    import torch.distributed as dist

    with gloo_rank(rank, 3, store):
        if rank == 2:  # node1's egress cut: each message leaves after its bytes' time at RATE
            send = dist.send

            def slow(tensor, *args, **kwargs):
                time.sleep(tensor.numel() * tensor.element_size() / RATE)
                return send(tensor, *args, **kwargs)

            dist.send = slow
        table = links.probe(NODES, rank, dist.group.WORLD)
        out.put((rank, {f"{a}->{b}": ts for (a, b), ts in table.items()}, links.named(table)))


def test_the_leaders_probe_each_way_and_the_node_whose_egress_is_slow_is_named(tmp_path):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, str(tmp_path / "store"), out)) for r in range(3)]
    for p in procs:
        p.start()
    got = sorted((out.get(timeout=120) for _ in procs), key=lambda g: g[0])
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    tables = [t for _, t, _ in got]
    assert all(t == tables[0] for t in tables)  # summed: the same on every rank, rank 1 (no leader) included
    table = tables[0]
    assert set(table) == {"node0->node1", "node1->node0"} and all(len(ts) == links.REPS for ts in table.values())
    assert min(table["node1->node0"]) >= links.BYTES / RATE  # timed on the sender's clock, its bytes' time
    assert all(n[:2] == ("node", "node1") for _, _, n in got), got
