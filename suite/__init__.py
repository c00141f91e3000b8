"""Harness for the distributed-communication experiment suite.

Every experiment builds on these modules: ``config`` (typed knobs), ``dist``
(process-group lifecycle), ``timing`` (the only timing loop), ``metrics``
(pure bandwidth/latency math), ``verify`` (exact checks), ``results`` (records
and atomic JSON), ``sysinfo`` (environment capture), ``plugin`` (pytest glue),
``report`` (tables from stored JSON) and ``launch`` (the command-line front door).
"""

__version__ = "0.1.0"
