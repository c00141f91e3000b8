"""Offline, from stored JSON only: ``cli`` (``python -m suite.report``), ``analysis`` (the report),
``sections`` (Plot, Section, the generic section), ``series`` (how records group), ``fits`` and ``fit_table``
(α–β fits and their table), ``summary`` and ``environment`` (the first screen's and the environment's rows),
``specs`` (what the experiments' specs tell the report), ``render`` (HTML, Markdown, CSV), ``plots``,
``compare`` (case-by-case verdicts and the gate: its entry point; ``case_identity``, ``case_settings``,
``compare_stats``, ``verdicts`` and ``compare_text`` its parts), ``shrinkage`` (per-case noise) and ``tables``
(the text tables). Nothing here imports torch.distributed or the harness."""
