"""Shared workloads (nccl-tests' ``<op>.cu`` files): what one rank runs and checks, for any experiment.

- ``collectives``: the op table, one ``Collective`` per torch.distributed collective.
- ``algorithms``: all_reduce built from point-to-point (ring, naive, hierarchical) and the
  deadlock-free exchange orderings.
- ``p2p``: the point-to-point patterns, one file each filling a ``Pattern``, listed in ``PATTERNS``.

No module here names an experiment: the experiment passes its name to the declarations.
"""
