"""The readers of a run's folder, for when its ranks have ended or hang: ``hang`` (the hang diagnosis: where each
rank is, from the dumps it asks the ranks for, their ring files and the flight recorder's; one verdict line),
``divergence`` (which rank diverged, from the ranks' journals: pure) and ``trace`` (the ranks' timeline parts
merged into ``trace.json``; ``python -m suite.postmortem.trace RUN`` again later). The launcher calls them; they
read files only, and import neither suite.launch nor suite.harness nor torch (tests/unit/test_import_graph.py)."""
