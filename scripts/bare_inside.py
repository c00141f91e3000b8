"""A pytest plugin: the bare loop (scripts/bare_loop.py) run inside the suite's own rank processes, right before
and right after each selected case of the suite, on the same ranks, cores and process group.

    PYTHONPATH=scripts BARE_INSIDE_OUT=bare.jsonl python -m suite.launch ... -- -p bare_inside -k ...

It imports nothing from the suite. It keeps ``torch.distributed.barrier`` and ``all_reduce`` as they are when
pytest loads it, before the suite's journal wraps them (at the session's start), so the bare loop calls torch's
own functions while the suite's case calls its wrapped ones. Per case whose name carries a size (``-<n>B-``),
rank 0 appends one JSON line to ``BARE_INSIDE_OUT``: the case's name, the size and the bare loop's samples (in
seconds) before and after it, and between those and the case the same loop through the functions as the suite's
journal wraps them (``journaled_s``: the journal's own share of the difference). ``BARE_ITERS`` and
``BARE_WARMUP`` set the loop's iterations and warm-up, ``BARE_GAP_US`` its busy wait before each sample (0).
``BARE_PIN=1`` pins the rank, every thread of it, to a core of its own when pytest starts (``bare_loop.pin``),
before its process group and its threads exist.
A launch-to-launch difference (where the scheduler puts the ranks, what else runs) falls on both sides alike;
what the suite's processes run besides (threads) does too, which comparing separate launches shows instead
(scripts/timing_vs_bare.py does both).
"""

import json
import os
import re

import pytest
import torch.distributed as dist

import bare_loop

BARRIER, ALL_REDUCE = dist.barrier, dist.all_reduce


def pytest_configure(config):
    if os.environ.get("BARE_PIN") == "1":
        bare_loop.pin()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    m = re.search(r"-(\d+)B-", item.name)
    if m is None:
        yield
        return
    size, iters, warmup = int(m.group(1)), int(os.environ["BARE_ITERS"]), int(os.environ["BARE_WARMUP"])
    gap = float(os.environ.get("BARE_GAP_US", "0"))
    # bare, journaled, the case, journaled, bare: each comparison is symmetric in time, so a drift of the
    # machine's load falls on both of its sides alike
    before = bare_loop.samples(size, iters, warmup, BARRIER, ALL_REDUCE, gap)
    journaled = bare_loop.samples(size, iters, warmup, dist.barrier, dist.all_reduce, gap)  # as the journal wraps them
    yield
    journaled += bare_loop.samples(size, iters, warmup, dist.barrier, dist.all_reduce, gap)
    after = bare_loop.samples(size, iters, warmup, BARRIER, ALL_REDUCE, gap)
    if dist.get_rank() == 0:
        line = {"case": item.name, "size": size, "before_s": before, "after_s": after, "journaled_s": journaled}
        with open(os.environ["BARE_INSIDE_OUT"], "a") as fh:
            fh.write(json.dumps(line) + "\n")
