"""What the host's launcher and the ranks both use, and nothing else: ``config`` (every knob, validated) and
``knobs`` (their spellings), ``switches`` (every SUITE_* switch) and ``faults`` (the grammar of the planted faults
they name), ``backends`` (which backend and device a run uses: preflight's rules, a rank's init applies them
again), ``failures`` (exit statuses and failure notes), ``fileio`` (atomic files), the files one side writes and
the other reads (``journal_ring``, ``flight_recorder``, ``rank_exits``, ``timed_start``), ``node_env`` (each
node's own environment under mpiexec) and ``progress`` (rank 0's live line, whose terminal the launcher
restores). It imports neither suite.launch nor suite.harness (tests/unit/test_import_graph.py), and no experiment
when imported: their settings are read when first asked for (``knobs.sections()``)."""
