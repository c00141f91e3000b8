"""Offline, from stored JSON only: ``cli`` (``python -m suite.report``), ``analysis`` (sections, fits),
``render`` (HTML, Markdown, CSV), ``plots``, ``compare`` (case-by-case verdicts and the gate), ``shrinkage``
(per-case noise) and ``tables`` (the text tables). Nothing here imports torch.distributed or the harness."""
