"""Code that runs on every rank. ``ls`` shows the core and its parts.

The core: ``runner`` (the one harness, running the cases of suite/case.py); ``timing`` (the one timing loop), with
``cuda_graph``, ``budget``, ``rank_samples`` and ``autorange``; ``phases`` and ``profiling`` (where the time goes);
``verify`` (exact checks), ``checks`` (the harness's own, around a case's) and ``sgd_rule`` (the training
experiments' check); ``dist`` (the process group's lifecycle, heartbeat), ``groups`` (every other group), ``c10d``
(c10d's private API, version-checked) and ``null_backend`` (a one-rank group whose ops complete at once: the
yardstick of make suite-cost).

Its parts, one package each: ``journal/`` (the per-rank op journal, its after-case check, its dumps, the rank's
part of the run's timeline), ``plant/`` (the suite's own planted faults: the switches' grammar is
suite/common/faults.py), ``mpi/`` (BACKEND=mpi's process group and its ranks) and ``pytest/`` (the pytest bridge,
the ranks' ``pytest -p suite.harness.pytest.plugin``). What it shares with the launcher is suite/common/; it imports
nothing of suite/launch/."""
