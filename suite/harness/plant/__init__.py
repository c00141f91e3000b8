"""The suite's own planted faults, which prove the checks (their switches' grammar is suite/common/faults.py):
``backend`` (SUITE_INJECT_BACKEND: the calls it arms, on plain Gloo), ``mode`` (its mechanism: a dispatch mode
around each armed call), ``corruptions`` (what each class does to a finished op's result, and SUITE_INJECT_CORRUPTION's
flip and misroute of a case's buffers: one implementation) and ``below`` (SUITE_INJECT_DIVERGE=...@below, on
torch.distributed itself)."""
