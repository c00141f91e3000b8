"""The timing loop, the harness and init_distributed in this process, on a one-rank Gloo group."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch

from suite.harness import verify
from suite.harness.pytest import bench_adapter

from suite.common import faults
from suite.ops import collectives as ops
from suite.ops import sweep
from suite.case import Buffers, Bytes, Case, CaseSkipped
from suite.common.config import BenchConfig
from suite.harness.dist import init_distributed
from suite.harness.runner import Harness
from suite.harness.timing import measure
from tests.helpers.inprocess import CFG


def test_init_distributed_starts_a_lone_gloo_group(ctx):
    assert (ctx.rank, ctx.world_size, ctx.backend, ctx.device.type) == (0, 1, "gloo", "cpu")
    assert ctx.agree_all(True) and not ctx.agree_all(False)
    with pytest.raises(RuntimeError, match="already started"):  # one group per process, passed on explicitly
        init_distributed(CFG)
    assert ctx.watchdog is None  # alone: nothing to watch


def test_measure_times_every_iteration_and_each_ranks_arrival_at_the_op(ctx):
    # before_op runs once per timed sample, after the barrier and before the op call: it is in the
    # sample and in the rank's arrival (barrier exit -> op call); the op's own time is not in the arrival.
    calls = []

    def op(async_op):
        calls.append("op")
        time.sleep(0.002)

    def late():
        calls.append("before")
        time.sleep(0.003)

    m = measure(ctx, CFG, op, before_op=late)
    assert calls == ["op"] * CFG.warmup_iters + ["before", "op"] * CFG.iters and m.iterations == CFG.iters
    assert all(s >= 0.005 for s in m.samples_s)
    assert m.rank_median_s == [m.median_s] and len(m.rank_arrival_median_s) == 1
    assert m.rank_arrival_median_s[0] >= 0.003
    assert m.timing_mode == "blocking" and m.ops_per_sample == 1 and m.timer == "host"
    plain = measure(ctx, CFG, op)  # without before_op nothing stands between the barrier and the op
    assert all(a < s for a, s in zip(plain.rank_arrival_median_s, plain.rank_median_s))


def test_pipelined_cycles_over_one_op_per_buffer_set_and_resets_once_after_the_samples(ctx):
    cfg = BenchConfig(iters=3, warmup_iters=0, timing_mode="pipelined", pipeline_depth=3, heartbeat_timeout_s=0)
    issued, resets, hooks = [], [], []
    ops_ = [lambda a, i=i: issued.append((i, a)) for i in range(3)]
    m = measure(
        ctx, cfg, ops_, reset=lambda: resets.append(len(issued)), before_sample=lambda: hooks.append(len(issued))
    )
    # each set once per sample, async; then, after the reset, one more untimed sample for the check
    assert issued == [(i, True) for _ in range(4) for i in range(3)]
    assert resets == [9]  # after every timed sample: nothing is written between them
    assert hooks == [0, 3, 6]  # before each timed sample, never inside one, not before the check's
    assert m.ops_per_sample == 3 and m.buffer_sets == 3 and m.iterations == 3


def test_precision_cap_covers_the_whole_case_even_a_first_round_longer_than_it(ctx):
    # the warm-up and first round (4 x 30 ms) alone exceed the 50 ms cap: no second round
    cfg = BenchConfig(iters=3, warmup_iters=1, precision_pct=1e-6, max_time_s=0.05, heartbeat_timeout_s=0)
    m = measure(ctx, cfg, lambda a: time.sleep(0.03))
    assert m.iterations == 3 and m.precision_reached is False
    # the cap counts from the case's start (the harness passes it: build and check count too)
    cfg = dataclasses.replace(cfg, max_time_s=5.0)
    m = measure(ctx, cfg, lambda a: None, started_at=time.monotonic() - 10.0)
    assert m.iterations == 3 and m.precision_reached is False
    # a reachable target stops at the first look that meets it (20 ms sleeps: a loaded machine's
    # scheduling jitter, milliseconds, cannot widen the CI to 50% of the median; 1 ms sleeps could)
    m = measure(ctx, dataclasses.replace(cfg, precision_pct=50.0, iters=10), lambda a: time.sleep(0.02))
    assert m.iterations == 10 and m.precision_reached is True


def test_measure_keeps_rank_samples_only_when_asked(ctx):
    assert measure(ctx, CFG, lambda a: None).rank_samples_s is None
    m = measure(ctx, CFG, lambda a: None, keep_rank_samples=True)
    assert m.rank_samples_s == [m.samples_s]


def test_harness_runs_every_collective_and_checks_it(ctx):
    h = Harness(ctx, CFG, env={})
    cases = sweep.collective_cases(CFG, 1, experiment="collectives")
    assert {c.identity["variant"] for c in cases} == set(ops.BY_VARIANT)
    for case in cases:
        m, rec = h.run(case)
        if case.op == "barrier":
            assert rec["checked"] is False and rec["n_wrong"] is None
        else:
            assert rec["checked"] is True and rec["n_wrong"] == 0 and rec["n_wrong_timed"] == 0, case.label
        assert rec["label"] == case.label and rec["iterations"] == CFG.iters
        assert set(rec["identity"]) >= {"variant", "redop", "in_place", "root"}


def test_the_check_run_writes_misaligned_outputs_and_the_timed_sets_aligned_ones(ctx):
    """Each collective's check run gets outputs one element off any wide alignment (a backend that assumes
    aligned buffers is wrong there); the timed buffer sets keep a fresh allocation's alignment, so what is
    timed is what a user's tensors would give."""
    for case in sweep.collective_cases(CFG, 1, experiment="collectives"):
        built = []

        def build(c, session, build=case.build, built=built):
            b = build(c, session)
            built.append([t.data_ptr() for t in b.outputs()] if b.outputs is not None else [])
            return b

        _, rec = Harness(ctx, CFG, env={}).run(dataclasses.replace(case, build=build))
        if case.op == "barrier":
            continue
        check_run, *timed = built
        assert check_run and timed and rec["n_wrong"] == 0, case.label
        assert all(p % 16 for p in check_run), (case.label, [p % 64 for p in check_run])
        assert all(p % 64 == 0 for ptrs in timed for p in ptrs), (case.label, [p % 64 for p in timed[0]])


def test_an_op_that_assumes_an_aligned_output_fails_its_check_run(ctx):
    """The bug the misaligned check run is for: an op that writes its result at its output's address rounded down
    to 16 bytes (a vectorised kernel that assumes alignment). Its timed buffers are aligned, so only the check run
    sees it, as a write into the guard band before the output and an output left as poison."""
    src = torch.arange(1.0, 9.0)

    def build(c, session):
        out = verify.output(src.numel(), src.dtype, misalign=c.check_run)
        whole, before = out.suite_guard
        start = before - (out.data_ptr() % 16) // out.element_size()  # where an aligned kernel writes

        def call(async_op):
            whole.narrow(0, start, src.numel()).copy_(src)

        return Buffers(
            call=call,
            check=lambda: verify.count_wrong(out, src),
            outputs=lambda: [out],
        )

    case = Case(experiment="x", op="aligned_copy", label="aligned_copy", identity={}, build=build,
                bytes=Bytes(size_bytes=32, count=8, dtype="float32", bw_op=None))  # fmt: skip
    _, rec = Harness(ctx, CFG, env={}).run(case)
    assert rec["n_wrong_check"] > 0 and rec["n_wrong_timed"] == 0, rec
    assert any("guard band before the output overwritten" in f for f in rec["wrong_found"]), rec["wrong_found"]


def test_harness_catches_a_corrupted_timed_buffer_and_a_corrupted_check(ctx):
    case = sweep.collective_cases(CFG, 1, experiment="collectives")[0]  # all_reduce sum, in place
    _, rec = Harness(ctx, CFG, env={"SUITE_INJECT_CORRUPTION": "all_reduce@timed"}).run(case)
    assert (rec["n_wrong_check"], rec["n_wrong_timed"], rec["n_wrong"]) == (0, 1, 1)
    _, rec = Harness(ctx, CFG, env={"SUITE_INJECT_CORRUPTION": "all_reduce"}).run(case)
    assert (rec["n_wrong_check"], rec["n_wrong_timed"]) == (1, 0)


def test_in_place_inputs_are_reset_so_the_timed_result_is_one_op(ctx):
    # all_reduce SUM in place on one rank is the identity, so use a case whose op changes its input
    # every call: without the reset the timed buffer would hold the input + (warmup + iters).
    t = torch.zeros(4)
    pristine = torch.zeros(4)

    def inc(async_op):
        t.add_(1)

    case = Case(  # no identity: a case that declares none has an empty one (it raised TypeError)
        experiment="x",
        op="inc",
        label="inc",
        bytes=Bytes(size_bytes=16, count=4, dtype="float32", bw_op=None),
        build=lambda c, session: Buffers(
            call=inc, check=lambda: int((t != 1).sum()), outputs=lambda: [t], reset=lambda: t.copy_(pristine)
        ),
    )
    _, rec = Harness(ctx, CFG, env={}).run(case)
    assert rec["n_wrong"] == 0 and rec["busbw_gbps"] is None and rec["busbw_factor"] is None


def test_unchecked_and_skipped_cases_say_why(ctx):
    base = dict(
        experiment="x",
        op="noop",
        label="noop",
        identity={},
        bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None),
        build=lambda c, session: Buffers(call=lambda a: None),
    )
    _, rec = Harness(ctx, CFG, env={}).run(Case(**base, unchecked="nothing moves"))
    assert rec["checked"] is False and rec["unchecked_reason"] == "nothing moves" and rec["n_wrong"] is None
    with pytest.raises(CaseSkipped, match="not here"):
        Harness(ctx, CFG, env={}).run(Case(**base, skip=lambda c, cfg: "not here"))


def test_support_probe_failure_skips_with_the_backends_words(ctx):
    def broken(c, session):
        raise RuntimeError("no such op on this backend")

    case = Case(
        experiment="x",
        op="weird",
        label="weird",
        identity={},
        bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None),
        build=broken,
        support=("weird_op", "float32"),
    )
    with pytest.raises(CaseSkipped, match="gloo does not support weird_op \\(float32\\): no such op"):
        Harness(ctx, CFG, env={}).run(case)


def test_bench_adapter_round_trips_samples(benchmark):
    bench_adapter.store_samples(benchmark, [1e-3, 3e-3, 2e-3], 2, group="g:op", extra={"label": "x"})
    st = benchmark.stats.stats
    assert (st.rounds, st.min, st.max, st.median) == (3, 1e-3, 3e-3, 2e-3)
    assert benchmark.group == "g:op" and benchmark.extra_info["label"] == "x"


def test_bench_adapter_refuses_an_unsupported_version():
    bench_adapter.check_version(bench_adapter.SUPPORTED_VERSION)
    with pytest.raises(bench_adapter.UnsupportedVersion, match="supports 5.3.1"):
        bench_adapter.check_version("6.0.0")


def test_watchdog_stop_waits_for_its_thread_to_leave_the_store(monkeypatch):
    # One TCPStore client must not be used by two threads at once, and no thread may still be in a
    # store call when the process exits: stop() returns only once the beating thread has ended.
    import datetime
    import threading

    import torch.distributed as dist

    from suite.harness.dist import Watchdog, free_port

    port = free_port()
    server = dist.TCPStore(
        "127.0.0.1", port, 1, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=10)
    )
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    wd = Watchdog(rank=0, world_size=2, hostnames=["a", "b"], timeout_s=60, results_dir=None, interval_s=0.05)
    inside = threading.Event()

    class SlowStore:  # the thread's store call takes a while, as on a loaded or remote store
        def __init__(self, store):
            self.store = store

        def add(self, key, n):
            inside.set()
            time.sleep(0.5)
            return self.store.add(key, n)

        def __getattr__(self, name):
            return getattr(self.store, name)

    wd.store = SlowStore(wd.store)
    wd.start()
    assert inside.wait(5)
    wd.stop()
    assert not wd._thread.is_alive()
    assert server.check(["suite/watchdog/done/0"])


def test_a_field_declared_twice_is_an_error_not_a_lost_value(ctx):
    case = Case(
        experiment="x",
        op="noop",
        label="twice",
        identity={"peer": 1},
        fields={"peer": 2},
        bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None),
        build=lambda c, session: Buffers(call=lambda a: None),
        unchecked="nothing moves",
    )
    with pytest.raises(ValueError, match="case twice: field\\(s\\) peer declared twice"):
        Harness(ctx, CFG, env={}).run(case)


def test_resolve_gets_its_own_case_and_returns_the_concrete_one(ctx):
    seen = []

    def resolve(case, c, cfg, session):
        seen.append(case.label)
        return dataclasses.replace(case, fields={**case.fields, "found": session.once("probe", lambda: 7)})

    case = Case(
        experiment="x",
        op="noop",
        label="late",
        identity={},
        fields={"table": "t"},
        bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None),
        build=lambda c, session: Buffers(call=lambda a: None),
        unchecked="nothing moves",
        resolve=resolve,
    )
    _, rec = Harness(ctx, CFG, env={}).run(case)
    assert seen == ["late"] and rec["found"] == 7 and rec["table"] == "t"


def test_every_build_gets_the_harness_session_so_cases_share_what_one_made(ctx):
    # Case.build(ctx, session): a builder that needs something made once per run (a reference trainer, a
    # mesh) takes it from the session itself, with no resolve hook to bind it
    made, seen = [], []

    def build(c, session):
        seen.append(session.once("shared", lambda: made.append(1) or object()))
        return Buffers(call=lambda a: None)

    harness = Harness(ctx, CFG, env={})
    for label in ("first", "second"):
        harness.run(
            Case(experiment="x", op="noop", label=label, identity={}, unchecked="nothing moves",
                 bytes=Bytes(size_bytes=0, count=0, dtype="none", bw_op=None), build=build)
        )  # fmt: skip
    assert made == [1] and len(seen) > 2 and all(s is seen[0] for s in seen)  # one object, every buffer set


def test_the_wrong_counts_say_how_they_were_obtained(ctx):
    _, rec = Harness(ctx, CFG, env={}).run(sweep.collective_cases(CFG, 1, experiment="collectives")[0])
    assert {"n_wrong", "n_wrong_check", "n_wrong_timed"} <= set(rec["provenance"])


def test_injected_delay_lands_before_or_after_the_op_call(ctx):
    # @before: between the barrier and the op call (the rank's arrival); @after (the default): after the
    # op completed, so not in the arrival. Both are in the sample.
    case = sweep.collective_cases(CFG, 1, experiment="collectives")[0]  # all_reduce sum, in place
    _, before = Harness(ctx, CFG, env={"SUITE_INJECT_DELAY": "0:0.003:all_reduce@before"}).run(case)
    _, after = Harness(ctx, CFG, env={"SUITE_INJECT_DELAY": "0:0.003:all_reduce"}).run(case)
    assert before["rank_arrival_us"][0] >= 3000 and before["time_us"] >= 3000
    # every sample >= its arrival + the sleep, so the medians are too
    assert after["time_us"] >= 3000 and after["rank_arrival_us"][0] <= after["time_us"] - 3000


@pytest.mark.parametrize(
    "spec", ["1", "x:0.1", "1:fast", "-1:0.1", "1:-0.5", "1:0.1@during", "1:0.1:a:b", "1:nan", "1:inf"]
)
def test_a_bad_delay_spec_is_one_clear_line(spec):
    with pytest.raises(ValueError, match=r"SUITE_INJECT_DELAY=.*expected <rank>:<seconds>"):
        faults.parse("SUITE_INJECT_DELAY", spec)


def test_a_delay_spec_reads_rank_seconds_name_and_where():
    d = faults.parse("SUITE_INJECT_DELAY", "2:0.015")
    assert (d.rank, d.seconds, d.name, d.when) == (2, 0.015, (), "after")
    d = faults.parse("SUITE_INJECT_DELAY", "1:0.05:all_reduce@before")
    assert (d.rank, d.seconds, d.name, d.when) == (1, 0.05, ("all_reduce",), "before")
    assert faults.parse("SUITE_INJECT_DELAY", "0:1@after").when == "after"


def test_each_record_says_what_the_journal_costs_and_the_harness_times_each_phase(ctx, monkeypatch):
    import torch.distributed as dist

    from suite.harness import journal

    import suite.harness.journal.wrap as journal_wrap

    case = sweep.collective_cases(CFG, 1, experiment="collectives")[0]
    h = Harness(ctx, CFG, env={})
    _, rec = h.run(case)
    assert "journal_us_per_op" not in rec  # no journal: nothing to say
    j = journal.Journal(0, None)
    # as journal.install leaves it
    monkeypatch.setattr(dist, "all_reduce", journal_wrap.wrap(j, "all_reduce", dist.all_reduce))
    assert journal.current() is j
    _, rec = h.run(case)
    assert 0 <= rec["journal_us_per_op"] < 10_000
    assert rec["provenance"]["journal_us_per_op"].startswith("measured: ")
    assert {"build", "check_run", "check", "warmup", "timed", "gather", "sequence_check", "record"} <= set(
        h.phases.seconds
    )
    assert all(s >= 0 for s in h.phases.seconds.values())


def test_sample_budget_stops_a_slow_case_early_and_leaves_a_fast_one_and_an_explicit_count():
    from suite.harness.budget import BUDGET_MIN_SAMPLES, budget_count

    # 20 x 10 ms fits in 1 s; 20 x 80 ms does not: 12 fit; 20 x 500 ms: the floor of 10
    assert budget_count([0.01] * 10, 20, 1.0) == 20
    assert budget_count([0.08] * 10, 20, 1.0) == 12
    assert budget_count([0.5] * 10, 20, 1.0) == BUDGET_MIN_SAMPLES == 10
    assert budget_count([0.5] * 10, 20, 0.0) == 20  # off
    assert budget_count([0.5] * 3, 3, 1.0) == 3  # asked for fewer than the floor: all of them


def test_measure_applies_the_budget_only_without_an_explicit_count(ctx):
    cfg = BenchConfig(iters=20, warmup_iters=0, budget_s=0.2, heartbeat_timeout_s=0)
    m = measure(ctx, cfg, lambda a: time.sleep(0.03))  # 20 x 30 ms > 0.2 s: stops at the floor
    assert (m.iterations, m.iters_requested, m.stopped_by_budget, m.budget_s) == (10, 20, True, 0.2)
    m = measure(ctx, cfg, lambda a: None)  # fast: the full count
    assert (m.iterations, m.stopped_by_budget) == (20, False)
    m = measure(ctx, cfg, lambda a: time.sleep(0.03), iters=12)  # an explicit count: exactly that
    assert (m.iterations, m.stopped_by_budget, m.budget_s) == (12, False, 0.0)


def test_the_budget_bounds_the_warm_up_of_a_slow_op_but_not_an_asked_count():
    from suite.harness.budget import WARMUP_MIN, warmup_count

    # the second warm-up iteration (past the first's one-time set-up) says what one costs; past WARMUP_MIN
    # the warm-up stops at WARMUP_SHARE of the budget (0.1 s of 1 s): 5 x 10 ms fit, 5 x 40 ms do not
    assert warmup_count([0.3, 0.01], 5, 1.0) == 5
    assert warmup_count([0.3, 0.04], 5, 1.0) == WARMUP_MIN == 2
    assert warmup_count([0.05, 0.02], 8, 1.0) == 5
    assert warmup_count([0.3, 0.04], 5, 0.0) == 5  # no budget: as asked


def test_measure_bounds_the_warm_up_under_the_budget_and_records_both_counts(ctx):
    from suite.case import Bytes
    from suite.results import CheckOutcome, RecordCase, make_record

    calls = []

    def slow(a):
        calls.append(1)
        time.sleep(0.03)

    cfg = BenchConfig(iters=10, warmup_iters=6, budget_s=0.2, heartbeat_timeout_s=0)
    m = measure(ctx, cfg, slow)  # 30 ms per op; 0.1 x 0.2 s holds none past the first two
    assert (m.warmup_iters, m.warmup_requested, len(calls)) == (2, 6, 2 + 10)
    calls.clear()
    m = measure(ctx, cfg, lambda a: calls.append(1))  # fast: every warm-up iteration asked for
    assert (m.warmup_iters, m.warmup_requested, len(calls)) == (6, 6, 6 + 10)
    calls.clear()
    m = measure(ctx, cfg, slow, warmup_iters=4)  # a count asked for by the caller: exactly that
    assert (m.warmup_iters, len(calls)) == (4, 4 + 10)
    rec = make_record(
        case=RecordCase(experiment="x", op="all_reduce", backend="gloo", device="cpu", world_size=1, in_place=True),
        size=Bytes(size_bytes=4, count=1, dtype="float32", bw_op="all_reduce"),
        m=m,
        check=CheckOutcome(wrong=(0, 0)),
    )
    assert (rec["warmup_iters"], rec["warmup_requested"]) == (4, 4)


def test_each_joins_hooks_in_order_and_none_when_there_are_none():
    from suite.case import each

    calls = []
    joined = each([lambda: calls.append(1), None, lambda: calls.append(2)])
    assert joined() is None and calls == [1, 2]
    assert each([None, None]) is None and each([]) is None
