"""What the suite runs per timed sample beyond a bare loop's barrier and op, on a one-rank Gloo group in this
process with the journal installed as in a run (its ring file included): the suite's own Python calls per sample,
counted (no clock: the count is the same on every machine). Each call there costs CPU between or inside the
samples, which a one-rank group shows as time added to the op (``make suite-cost``, docs/metrics.md)."""

from __future__ import annotations

import collections
import contextlib
import sys

import pytest
import torch.distributed as dist

import suite
import suite.harness.journal.wrap as journal_wrap
from suite.common import journal_ring
from suite.common.config import BenchConfig
from suite.harness import journal
from suite.harness.phases import Phases
from suite.harness.runner import Harness
from suite.ops import sweep
from tests.helpers.inprocess import lone_group

CFG = BenchConfig(iters=12, warmup_iters=2, min_bytes=1024, max_bytes=1024, budget_s=0.0, heartbeat_timeout_s=0)
SUITE = suite.__path__[0]
PER_SAMPLE = 11
"""The suite's own Python calls per timed sample, at most."""


@pytest.fixture(scope="module")
def ctx():
    with lone_group(CFG) as c:
        yield c


@pytest.fixture
def journaled(tmp_path):
    """A journal with its ring file on every torch.distributed op, as ``journal.install`` leaves them (undone
    after the test), and the run's Phases with the journal's timeline."""
    before = dict(vars(dist))
    j = journal.Journal(0, str(tmp_path))
    j.ring = journal_ring.Ring(tmp_path / "rank0.ring", "here", 0.0)
    journal_wrap.wrap_all(j)
    phases = Phases()
    phases.timeline = j.timeline
    try:
        yield j, phases
    finally:
        for k, v in before.items():
            if vars(dist).get(k) is not v:
                setattr(dist, k, v)


def _suite_calls(ctx, phases, iters: int) -> collections.Counter:
    """The suite's own Python functions called in the timed phase of the collectives case all_reduce, 1 KiB."""
    cfg = BenchConfig(**{**vars(CFG), "iters": iters})
    case = next(c for c in sweep.collective_cases(cfg, 1, experiment="collectives") if c.op == "all_reduce")
    calls, timed = collections.Counter(), phases.__class__.__call__

    def count(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(SUITE):
            calls[f"{frame.f_code.co_filename[len(SUITE) + 1 :]}:{frame.f_code.co_name}"] += 1

    @contextlib.contextmanager
    def profiled(self, name):
        with timed(self, name):
            sys.setprofile(count if name == "timed" else None)
            try:
                yield
            finally:
                sys.setprofile(None)

    h = Harness(ctx, cfg, env={}, phases=phases)
    phases.__class__.__call__ = profiled
    try:
        h.run(case)
    finally:
        sys.setprofile(None)
        phases.__class__.__call__ = timed
    return calls


def test_a_timed_sample_runs_few_of_the_suites_own_functions(ctx, journaled):
    j, phases = journaled
    few, many = _suite_calls(ctx, phases, 10), _suite_calls(ctx, phases, 30)
    per_sample = {k: (many[k] - few[k]) / 20 for k in many if many[k] != few[k]}
    # the closure; the journal's sample begun (a count and one ring-file store) and done; its record (2 entries:
    # ring buffer and ring file) and check of a block of samples' ops, its share per sample; the timeline's span
    assert sum(per_sample.values()) <= PER_SAMPLE, sorted(per_sample.items())


def test_every_collectives_call_names_only_torchs_function(ctx):
    """Inside a sample the case's call does what a bare loop's does: it looks up torch.distributed's function
    (there, as the journal may have swapped it) and nothing else; its group, reduce op, root and a barrier's
    arguments were found when its buffers were built."""
    h, seen = Harness(ctx, CFG, env={}), set()
    for case in sweep.collective_cases(CFG, 1, experiment="collectives"):
        form = case.label.split("-")[0]
        if form in seen:
            continue
        seen.add(form)
        b = case.build(ctx, h.session)
        names = set(b.call.__code__.co_names) - {"dist", "getattr"}
        assert names <= {n for n in names if callable(getattr(dist, n, None))}, (case.label, names)
        if b.release is not None:
            b.release()
    assert len(seen) >= 10
