"""The host side, before and around torchrun: ``cli`` (``python -m suite.launch``), ``config`` (every knob,
validated), ``knobs`` (their spellings), ``switches`` (every SUITE_* switch), ``preflight`` (checks before
any rank starts), ``supervise`` (the torchrun process tree), ``hang`` (the hang diagnosis), ``failures``
(exit statuses and failure notes) and ``fileio`` (atomic JSON)."""
