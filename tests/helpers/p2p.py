"""The point-to-point experiment's run arguments and what its records must show, for its unit and dist tests."""

from __future__ import annotations


TINY = ["--experiments", "p2p", "--iters", "3", "--warmup", "1"]


ORDERINGS = {"send_recv_parity", "isend_irecv", "batch_isend_irecv"}


EXPECTED_VARIANTS = {
    "pingpong": {"send_recv"},
    "pair_matrix": {"send_recv"},
    "window": {"unidirectional", "bidirectional"},
    "ring": ORDERINGS,
    "exchange": ORDERINGS,
    "producer": {"isend_each_same", "broadcast", "isend_each_distinct", "scatter"},
    "control": {"signal", "ready_go", "barrier"},
    "barrier_cost": {"no_barrier", "barrier_each_step"},
    "batching": {"send_each", "isend_each", "batch_isend_irecv", "coalesced"},
}
"""What the records of each pattern must show (written out: the code's own lists are what it checks)."""
