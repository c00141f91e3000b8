"""Code that runs on every rank: ``runner`` (the one harness, running the cases of suite/case.py), ``timing``,
``verify`` (exact checks), ``dist`` (process groups' lifecycle, heartbeat), ``groups`` (every other group),
``journal`` (the per-rank op journal; its wrappers ``journal_wrap``, its after-case check ``journal_check``,
its dumps ``journal_dump``), ``faults`` (the suite's own fault injection), ``phases``, ``profiling``,
``progress`` (rank 0's progress line), ``plugin`` (pytest glue) and ``bench_adapter`` (pytest-benchmark's
private API)."""
