"""Code that runs on every rank: ``runner`` (the one harness, running the cases of suite/case.py), ``timing``,
``verify`` (exact checks), ``dist`` (process groups' lifecycle, heartbeat), ``groups`` (every other group),
``journal/`` (the per-rank op journal: its wrappers, its after-case check, its dumps), ``faulty_backend`` and
``plants`` (the suite's own fault injection; the switches' grammar is suite/common/faults.py), ``phases``,
``profiling``, ``plugin`` (pytest glue) and ``bench_adapter`` (pytest-benchmark's private API). What it shares
with the launcher is suite/common/; it imports nothing of suite/launch/."""
