"""Shared workloads (nccl-tests' ``<op>.cu`` files): what one rank runs and checks, for any experiment.

- ``collectives``: the collective registry, one ``Collective`` (its builder) per form of a torch.distributed
  collective; the function's row is in the op table, suite/op_table.py.
- ``algorithms``: all_reduce built from point-to-point (ring, naive, hierarchical) and the
  deadlock-free exchange orderings.
- ``p2p``: the point-to-point patterns, one file each filling a ``Pattern``, listed in ``PATTERNS``.

No module here names an experiment: the experiment passes its name to the declarations.
"""
