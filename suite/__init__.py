"""Harness for the distributed-communication experiment suite.

What runs on every rank: ``case`` (the case protocol), ``runner`` (the one harness), ``timing``,
``verify`` (exact checks), ``ops`` (the collective op table), ``dist`` (process groups, heartbeat),
``journal`` (the per-rank op journal), ``plugin`` (pytest glue), ``results`` (records).
Around torchrun on the host: ``launch``, ``config``, ``preflight``, ``supervise``, ``hang``,
``failures``, ``fileio``. Offline, from stored JSON: ``report``, ``analysis``, ``render``, ``plots``,
``compare``, ``model`` (fits and predictions), ``doctor``. Pure math: ``metrics``, ``shrinkage``.
The README's code tour lists every module.
"""

__version__ = "0.1.0"
