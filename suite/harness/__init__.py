"""Code that runs on every rank: ``runner`` (the one harness, running the cases of suite/case.py), ``timing``,
``verify`` (exact checks), ``dist`` (process groups' lifecycle, heartbeat), ``groups`` (every other group),
``journal`` (the per-rank op journal), ``faults`` (the suite's own fault injection), ``phases``,
``profiling``, ``progress`` (rank 0's progress line), ``plugin`` (pytest glue) and ``bench_adapter``
(pytest-benchmark's private API)."""
