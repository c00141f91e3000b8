"""The journal keeps its promises without working inside a timed sample (suite/harness/journal/quiet.py), on a
one-rank Gloo group in this process: no entry is put between a sample's start and end, yet every timed op is in
the journal at its c10d sequence number; a sample that breaks the warm-up's pattern is marked, and the rest of the
round is journaled op by op again."""

from __future__ import annotations

import bisect
import time

import pytest
import torch
import torch.distributed as dist

import suite.harness.journal.wrap as journal_wrap
from suite.common.config import BenchConfig
from suite.harness import journal
from suite.harness.c10d import sequence_number
from suite.harness.phases import Phases
from suite.harness.runner import Harness
from suite.harness.timing import measure
from suite.ops import sweep
from tests.helpers.inprocess import lone_group

CFG = BenchConfig(iters=12, warmup_iters=2, min_bytes=256, max_bytes=256, budget_s=0.0, heartbeat_timeout_s=0)


@pytest.fixture(scope="module")
def ctx():
    with lone_group(CFG) as c:
        yield c


@pytest.fixture
def probed():
    """A journal on every torch.distributed op (as ``journal.install`` leaves them, undone after the test), a
    Phases whose timeline notes each timed sample's interval, and a probe of when each entry was put:
    (journal, phases, the entries put inside a sample)."""
    before = dict(vars(dist))
    j = journal.Journal(0, None)
    journal_wrap.wrap_all(j)
    phases, samples, puts = Phases(), [], []
    phases.timeline = j.timeline
    put, mark = j.put, j.timeline.sample
    j.put = lambda *a: (puts.append(time.perf_counter()), put(*a))[1]
    j.timeline.sample = lambda start, end: (samples.append((start, end)), mark(start, end))[1]

    def inside() -> int:
        starts = [a for a, _ in samples]
        return sum(1 for t in puts if (i := bisect.bisect(starts, t) - 1) >= 0 and t < samples[i][1])

    try:
        yield j, phases, inside
    finally:
        for k, v in before.items():
            if vars(dist).get(k) is not v:
                setattr(dist, k, v)


def test_no_journal_entry_is_put_inside_a_timed_sample_and_every_timed_op_is_journaled(ctx, probed):
    j, phases, inside = probed
    case = next(c for c in sweep.collective_cases(CFG, 1, experiment="collectives") if c.op == "all_reduce")
    j.set_case(case.label)
    _, rec = Harness(ctx, CFG, env={}, phases=phases).run(case)
    assert rec["n_wrong"] == 0 and inside() == 0
    # the timed samples' ops, as the hang diagnosis reads them: barrier then the case's op, each at its c10d
    # number, completed, in this case, the op with its shape
    timed = [e for e in j.ops if e[7] == "completed" and e[0] in ("barrier", "all_reduce")]
    pairs = [(a, b) for a, b in zip(timed, timed[1:]) if a[0] == "barrier" and b[0] == "all_reduce"]
    assert len(pairs) >= CFG.iters
    assert all(b[2] == a[2] + 1 and b[3] == torch.Size([64]) and b[6] == case.label for a, b in pairs)
    seqs = [e[2] for e in j.ops if e[2] is not None]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # one entry per number, in order
    assert seqs[-1] == sequence_number(dist.group.WORLD)  # nothing c10d counted is missing at the end
    assert getattr(dist.all_reduce, "__suite_journal__", None) is j  # the wrappers are back after the samples


def test_a_sample_that_breaks_the_pattern_is_marked_and_the_round_is_journaled_per_op_again(ctx, probed):
    j, phases, inside = probed
    x, calls = torch.zeros(4), []

    def op(async_op):
        calls.append(1)
        dist.all_reduce(x, group=ctx.group)
        if len(calls) == 2 + 5:  # the 5th timed sample also broadcasts: an op the warm-up did not issue
            dist.broadcast(x, src=0, group=ctx.group)

    j.set_case("breaks")
    measure(ctx, CFG, op, phases=phases)
    states = [e[7] for e in j.ops if e[0] == "all_reduce"]
    assert states[:2] == ["completed"] * 2  # the warm-up's, per op
    assert states[2:6] == ["completed"] * 4 and states[6] == "unconfirmed"  # per sample, then the broken one
    assert inside() == CFG.iters - 5  # from the next sample on: each one's all_reduce, per op
    assert [e[0] for e in j.ops].count("broadcast") == 0  # the broken sample's broadcast went unseen: c10d counted it
    assert j.ops[-1][2] == sequence_number(dist.group.WORLD)


def test_without_a_warm_up_every_timed_op_is_journaled_per_op(ctx, probed):
    j, phases, inside = probed
    x = torch.zeros(4)
    measure(ctx, CFG, lambda a: dist.all_reduce(x, group=ctx.group), warmup_iters=0, phases=phases)
    assert inside() == CFG.iters


def test_a_timed_op_that_raises_leaves_the_journal_saying_which_of_the_samples_ops_were_issued(ctx, probed):
    j, phases, _ = probed
    x, calls = torch.zeros(4), []

    def op(async_op):
        calls.append(1)
        if len(calls) == 2 + 3:  # the 3rd timed sample: its op fails (a rank's error) after the barrier
            raise RuntimeError("planted")
        dist.all_reduce(x, group=ctx.group)

    j.set_case("raises")
    with pytest.raises(RuntimeError, match="planted"):
        measure(ctx, CFG, op, phases=phases)
    barrier, reduce = j.ops[-2:]
    assert (barrier[0], barrier[7], reduce[0], reduce[7]) == ("barrier", "completed", "all_reduce", "unconfirmed")
    assert barrier[2] == sequence_number(dist.group.WORLD) and barrier[9] is not None
    assert getattr(dist.all_reduce, "__suite_journal__", None) is j  # the wrappers are back


def test_a_wrapper_above_the_journals_keeps_every_timed_op_journaled_per_op(ctx, probed):
    # a fault planted below the harness (suite/harness/plant/below.py) wraps torch.distributed's op above the journal's
    # wrapper, with functools.wraps (which copies the journal's marks onto it): it must stay, and see every call
    import functools

    j, phases, inside = probed
    seen, x, inner = [], torch.zeros(4), dist.all_reduce
    dist.all_reduce = functools.wraps(inner)(lambda *a, **kw: (seen.append(1), inner(*a, **kw))[1])
    measure(ctx, CFG, lambda a: dist.all_reduce(x, group=ctx.group), phases=phases)
    assert len(seen) == CFG.warmup_iters + CFG.iters and inside() == CFG.iters


def _one_case_per_builder() -> dict:
    """The collectives' cases, one per form (each form's buffers come with their own call)."""
    cases = {}
    for c in sweep.collective_cases(CFG, 1, experiment="collectives"):
        cases.setdefault(c.label.split("-")[0], c)
    return {c.label: c for c in cases.values()}


@pytest.mark.parametrize("label", sorted(_one_case_per_builder()))
def test_no_collective_puts_a_journal_entry_inside_a_timed_sample(ctx, probed, label):
    """Every collective's call finds torch's function when it is called, not when its buffers are built: a
    function taken at build time would be the journal's wrapper, recording inside every timed sample."""
    j, phases, inside = probed
    case = _one_case_per_builder()[label]
    j.set_case(case.label)
    _, rec = Harness(ctx, CFG, env={}, phases=phases).run(case)
    assert rec.get("n_wrong") in (None, 0) and inside() == 0
    assert not [e for e in j.ops if e[6] == case.label and e[7] == "unconfirmed"]
