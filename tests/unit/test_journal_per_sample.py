"""The journal keeps its promises without working inside a timed sample, nor between two samples of a block
(suite/harness/journal/quiet.py), on a one-rank Gloo group in this process: no entry is put between a sample's
start and end, nor anything recorded or checked between two samples of a block, yet every timed op is in the
journal at its c10d sequence number; a dump or the ring file read while a block is under way names the op in
flight, and nothing recorded ahead of it; a block that breaks the warm-up's pattern is marked, and the rest of the
round is journaled op by op again."""

from __future__ import annotations

import bisect
import time

import pytest
import torch
import torch.distributed as dist

import suite.harness.journal.dump as journal_dump
import suite.harness.journal.wrap as journal_wrap
from suite.common import journal_ring
from suite.common.config import BenchConfig
from suite.harness import journal
from suite.harness.c10d import sequence_number
from suite.harness.journal import quiet as journal_quiet
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


def test_a_block_that_breaks_the_pattern_is_marked_and_the_round_is_journaled_per_op_again(ctx, probed, monkeypatch):
    j, phases, inside = probed
    monkeypatch.setattr(journal_quiet, "BLOCK", 4)  # 12 samples: blocks of samples 0-3 and 4-7, then per op
    x, calls = torch.zeros(4), []

    def op(async_op):
        calls.append(1)
        dist.all_reduce(x, group=ctx.group)
        if len(calls) == 2 + 6:  # the 6th timed sample also broadcasts: an op the warm-up did not issue
            dist.broadcast(x, src=0, group=ctx.group)

    j.set_case("breaks")
    measure(ctx, CFG, op, phases=phases)
    states = [e[7] for e in j.ops if e[0] == "all_reduce"]
    assert states[:2] == ["completed"] * 2  # the warm-up's, per op
    assert states[2:6] == ["completed"] * 4  # the first block
    assert states[6:10] == ["unconfirmed"] * 4  # the broken one's block: which sample broke it is not told
    assert states[10:] == ["completed"] * 4 and inside() == 4  # the rest of the round: each all_reduce per op
    assert [e[0] for e in j.ops].count("broadcast") == 0  # the broken sample's broadcast went unseen: c10d counted it
    assert j.ops[-1][2] == sequence_number(dist.group.WORLD)


def _gaps(j, monkeypatch) -> tuple[list, list]:
    """Clock reads of each journal entry put and each check of c10d's numbers (journal/quiet.py ``_seqs``), and of
    each timed sample's (start, end), as lists filled while the test runs."""
    puts, checks, samples = [], [], []
    put, seqs, mark = j.put, journal_quiet._seqs, j.timeline.sample
    j.put = lambda *a: (puts.append(time.perf_counter()), put(*a))[1]
    monkeypatch.setattr(journal_quiet, "_seqs", lambda g: (checks.append(time.perf_counter()), seqs(g))[1])
    j.timeline.sample = lambda start, end: (samples.append((start, end)), mark(start, end))[1]
    return puts, checks, samples


def test_between_two_samples_of_a_block_the_journal_records_and_checks_nothing(ctx, probed, monkeypatch):
    """Its work between two samples moves what the next op costs on Gloo (its worker thread's hand-off): a block
    of samples is recorded before its first and checked after its last; between its samples, nothing but a count.
    (Recording and checking each sample's ops between samples, every gap had both.)"""
    j, phases, inside = probed
    monkeypatch.setattr(journal_quiet, "BLOCK", 4)
    puts, checks, samples = _gaps(j, monkeypatch)
    case = next(c for c in sweep.collective_cases(CFG, 1, experiment="collectives") if c.op == "all_reduce")
    j.set_case(case.label)
    _, rec = Harness(ctx, CFG, env={}, phases=phases).run(case)
    assert rec["n_wrong"] == 0 and inside() == 0 and len(samples) == CFG.iters
    gaps = list(zip((e for _, e in samples), (s for s, _ in samples[1:])))  # each sample's end to the next's start
    assert [i for i, (a, b) in enumerate(gaps) if any(a < t < b for t in puts)] == [3, 7]  # before samples 4, 8
    assert [i for i, (a, b) in enumerate(gaps) if any(a < t < b for t in checks)] == [3, 7]  # after samples 3, 7
    ours = [e for e in j.ops if e[6] == case.label]
    assert all(e[7] == "completed" for e in ours)
    barriers = {e[9]: e for e in ours if e[0] == "barrier"}
    reduces = {e[9]: e for e in ours if e[0] == "all_reduce"}
    for start, end in samples:  # each op its own sample's times, its sequence number after its barrier's
        assert reduces[end][8] == start and reduces[end][2] == barriers[start][2] + 1


def test_a_dump_and_the_ring_file_in_a_block_name_the_op_in_flight_and_nothing_recorded_ahead(
    ctx, probed, monkeypatch, tmp_path
):
    j, phases, _ = probed
    monkeypatch.setattr(journal_quiet, "BLOCK", 4)
    j.ring = journal_ring.Ring(tmp_path / "rank0.ring", "here", 0.0)
    x, calls, seen = torch.zeros(4), [], {}

    def op(async_op):
        calls.append(1)
        if len(calls) == 2 + 6:  # the 6th timed sample, the 2nd of its block: a hang's dump, read here
            seen["dump"] = journal_dump.snapshot(j, "test")
            seen["ring"] = journal_ring.read(tmp_path / "rank0.ring", 0)
            seen["seq"] = sequence_number(dist.group.WORLD)
        dist.all_reduce(x, group=ctx.group)

    j.set_case("in flight")
    measure(ctx, CFG, op, phases=phases)
    live = seen["seq"]  # the sample's barrier is issued; its all_reduce is the next op, the one this rank is in
    for how in ("dump", "ring"):
        tail = seen[how]["tail"]
        assert max(e["seq"] for e in tail) == live + 1, how  # nothing recorded ahead of the sample
        assert (tail[-1]["op"], tail[-1]["state"], tail[-1]["case"]) == ("all_reduce", "entered", "in flight"), how
        assert [e["op"] for e in tail[-4:]] == ["barrier", "all_reduce"] * 2
    dump = seen["dump"]
    assert dump["seq"]["0"] == live and dump["tail"][-2]["state"] == "entered"  # as the wrappers leave a sample
    assert [e["state"] for e in dump["tail"][-4:-2]] == ["completed"] * 2  # the block's sample done
    assert dump["case_ops"]["all_reduce"] == 2 + 6 and dump["tail"][-2]["clock"] == dump["tail"][-3]["end_clock"]
    assert seen["ring"]["case_ops"]["all_reduce"] == 2 + 6
    # after the round the journal has every op, as if it had been journaled per sample
    states = [e[7] for e in j.ops if e[0] == "all_reduce"]
    assert states == ["completed"] * (2 + CFG.iters) and j.ops[-1][2] == sequence_number(dist.group.WORLD)


def test_without_a_warm_up_every_timed_op_is_journaled_per_op(ctx, probed):
    j, phases, inside = probed
    x = torch.zeros(4)
    measure(ctx, CFG, lambda a: dist.all_reduce(x, group=ctx.group), warmup_iters=0, phases=phases)
    assert inside() == CFG.iters


def test_a_dump_while_a_block_is_being_recorded_reads_its_ops_as_not_issued(ctx, probed, monkeypatch, tmp_path):
    """The dump's thread may read the journal while the main thread puts a block's entries: none of them is issued
    yet, whatever the dump or the ring file reads then."""
    j, phases, _ = probed
    monkeypatch.setattr(journal_quiet, "BLOCK", 4)
    j.ring = journal_ring.Ring(tmp_path / "rank0.ring", "here", 0.0)
    x, seen, put = torch.zeros(4), {}, j.put

    def putting(*a):
        e = put(*a)
        if j.written == 2 + 2 * 4 + 3 + seen.setdefault("base", 0):  # the 3rd entry of the 2nd block
            seen["dump"] = journal_dump.snapshot(j, "test")
            seen["ring"] = journal_ring.read(tmp_path / "rank0.ring", 0)
            seen["seq"] = sequence_number(dist.group.WORLD)
        return e

    j.set_case("recording")
    seen["base"] = j.written
    j.put = putting
    measure(ctx, CFG, lambda a: dist.all_reduce(x, group=ctx.group), phases=phases)
    for how in ("dump", "ring"):
        tail = seen[how]["tail"]
        assert max(e["seq"] for e in tail) == seen["seq"], how  # the last op issued, nothing of the block
        assert tail[-1]["op"] == "all_reduce", how
    assert seen["dump"]["case_ops"]["all_reduce"] == 2 + 4


def test_a_timed_op_that_raises_leaves_the_journal_saying_which_of_the_samples_ops_were_issued(
    ctx, probed, monkeypatch, tmp_path
):
    j, phases, _ = probed
    monkeypatch.setattr(journal_quiet, "BLOCK", 4)
    j.ring = journal_ring.Ring(tmp_path / "rank0.ring", "here", 0.0)
    x, calls = torch.zeros(4), []

    def op(async_op):
        calls.append(1)
        if len(calls) == 2 + 7:  # the 7th timed sample, the 3rd of its block: its op fails after the barrier
            raise RuntimeError("planted")
        dist.all_reduce(x, group=ctx.group)

    j.set_case("raises")
    with pytest.raises(RuntimeError, match="planted"):
        measure(ctx, CFG, op, phases=phases)
    barrier, reduce = j.ops[-2:]
    assert (barrier[0], barrier[7], reduce[0], reduce[7]) == ("barrier", "completed", "all_reduce", "unconfirmed")
    assert barrier[2] == sequence_number(dist.group.WORLD) and barrier[9] is not None
    # the block's samples before it are done; the ops recorded ahead of it left the journal and its ring file
    assert [e[7] for e in j.ops if e[0] == "all_reduce"] == ["completed"] * (2 + 6) + ["unconfirmed"]
    assert j.case_ops["all_reduce"] == 2 + 7 and list(j.entries)[-1] is reduce
    ring = journal_ring.read(tmp_path / "rank0.ring", 0)["tail"]
    assert (ring[-1]["op"], ring[-1]["seq"]) == ("all_reduce", reduce[2])
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


def test_a_timed_round_puts_torchs_own_batch_isend_irecv_back_then_the_journals(ctx, probed):
    """A pipeline schedule's step calls ``batch_isend_irecv`` (1F1B's steady state sends and receives in one batch):
    left journaled in a timed round, its ops were journaled inside the samples, broke every block and were counted
    twice (the block's c10d count and the wrapper's) while the block's other p2p ops went uncounted: ranks with
    different p2p traffic then failed the after-case check."""
    j, _, _ = probed
    wrapper = dist.batch_isend_irecv
    assert getattr(wrapper, "__suite_journal__", None) is j
    q = journal_quiet.Quiet(j, ctx.group, [])
    assert q.on and not getattr(dist.batch_isend_irecv, "__suite_journaled__", False)
    assert dist.P2POp(dist.isend, torch.zeros(1), 0).op is dist.isend  # torch's own, as batch_isend_irecv checks
    q.end()
    assert dist.batch_isend_irecv is wrapper


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


def test_the_folder_for_nccls_dump_is_made_only_where_a_dump_file_is_set(tmp_path):
    """A profiled Gloo run switches the recorder on (its buffer) with no dump file: no ``failures/`` folder is made
    for a dump that never comes. An NCCL run's launcher names the file: its folder is made for NCCL to write into."""
    run = tmp_path / "run"
    assert journal_dump.nccl_dump_folder({"TORCH_FR_BUFFER_SIZE": "20000"}) is None
    nccl = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": str(run / "failures" / "nccl_trace_rank_")}
    assert journal_dump.nccl_dump_folder(nccl) == run / "failures"
    old = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(run / "f" / "t_")}
    assert journal_dump.nccl_dump_folder(old) == run / "f"
    assert journal_dump.nccl_dump_folder({**nccl, "TORCH_FR_BUFFER_SIZE": "0"}) is None  # the recorder off


def test_the_blocks_record_falls_before_one_sample_in_64_of_a_one_op_case(ctx, probed):
    """The journal's record of a block (a few dozen µs of work) makes the sample after it slower by a microsecond or
    so (docs/measurements/2026-12-07-cpu-2core-idle-wakeup.md): a block of 64 samples keeps that to 1 sample in
    64, which moves a round's median by hundredths of a microsecond, where blocks of 16 moved it by tenths."""
    j, phases, inside = probed
    cfg = BenchConfig(iters=128, warmup_iters=2, min_bytes=256, max_bytes=256, budget_s=0.0, heartbeat_timeout_s=0)
    case = next(c for c in sweep.collective_cases(cfg, 1, experiment="collectives") if c.op == "all_reduce")
    j.set_case(case.label)
    samples, mark = [], j.timeline.sample
    j.timeline.sample = lambda start, end: (samples.append(start), mark(start, end))[1]
    puts, put = [], j.put
    j.put = lambda *a: (puts.append(time.perf_counter()), put(*a))[1]
    _, rec = Harness(ctx, cfg, env={}, phases=phases).run(case)
    assert rec["n_wrong"] == 0 and inside() == 0 and len(samples) == 128
    recorded_before = {bisect.bisect(samples, t) for t in puts if samples[0] - 1 < t < samples[-1]}
    assert recorded_before == {0, 64}, sorted(recorded_before)  # before the first sample: warm-up, first block
