"""The pytest bridge: every rank runs ``pytest -p suite.harness.pytest.plugin``. ``plugin`` (options, fixtures,
the declared cases parametrized; every hook), ``run_state`` (the session's state on this rank), ``results_file``
(a case as a pytest-benchmark entry; rank 0's bench.json), ``rank_output`` (what each rank prints),
``failure_notes`` (a case that raised) and the adapters of two private APIs: ``bench_adapter`` (pytest-benchmark's)
and ``terminal`` (pytest's terminal writer). The rest of suite/harness/ imports nothing of it."""
