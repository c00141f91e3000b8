"""The point-to-point experiment's pure logic: its declared cases and its tables (the runs on real
Gloo groups are tests/dist/test_p2p.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from experiments.p2p import cases as experiment
from suite import metrics
from suite.common.config import build_config
from suite.harness.dist import DistContext
from experiments.p2p.table import format_tables
from suite.ops import p2p
from suite.ops.p2p import batching, link_probe, window
from suite.ops.p2p.pattern import Pattern, Spec, cross, make_case
from tests.helpers.p2p import EXPECTED_VARIANTS


# --- pure logic -----------------------------------------------------------------------------------


@pytest.mark.parametrize("world", [2, 3, 4])
def test_cases_cover_every_pattern_and_are_unique(world):
    cfg = build_config(min_bytes="1K", max_bytes="1M", step_factor="4")
    cases = experiment.cases(cfg, world)
    ids = [c.label for c in cases]
    assert len(ids) == len(set(ids))
    assert {c.identity["pattern"] for c in cases} == set(p2p.PATTERNS)
    assert all(max(c.identity["src"], c.identity["dst"]) < world for c in cases)
    assert all(c.experiment == "p2p" and c.timing.mode == "blocking" for c in cases)
    pairs = {(c.identity["src"], c.identity["dst"]) for c in cases if c.identity["pattern"] == "pair_matrix"}
    assert pairs == {(a, b) for a in range(world) for b in range(world) if a != b}
    assert {c.bytes.size_bytes for c in cases if c.identity["pattern"] == "pair_matrix"} == {1 << 10, 1 << 20}
    # only the barrier has nothing to check, and says why
    assert [c.label for c in cases if c.unchecked] == ["control-barrier"]
    # world 1: one case that says why nothing runs (not an empty parameter set)
    alone = experiment.cases(cfg, 1)
    assert [c.label for c in alone] == ["p2p"] and "at least 2 ranks" in alone[0].skip(None, cfg)


def _rec(**kw) -> dict:
    base = {
        "experiment": "p2p",
        "op": "send_recv",
        "backend": "gloo",
        "device": "cpu",
        "dtype": "float32",
        "world_size": 3,
        "iterations": 5,
        "n_wrong": 0,
        "algbw_gbps": 1.0,
        "busbw_gbps": 1.0,
    }
    return base | kw


def test_cross_node_pairs_and_slow_links_are_marked():
    # ranks 0 and 1 share a host, rank 2 is on another: as ctx.node_of() decides it
    ctx = DistContext(
        rank=0,
        world_size=3,
        local_rank=0,
        local_world_size=2,
        backend="gloo",
        device=torch.device("cpu"),
        group=None,
        timeout_s=1.0,
        hostnames=["a", "a", "b"],
    )
    assert [cross(ctx, 0, b) for b in (1, 2)] == [False, True]
    recs = [
        _rec(
            pattern="pair_matrix",
            variant="send_recv",
            size_bytes=64,
            src=a,
            dst=b,
            cross_node=cross(ctx, a, b),
            time_us=500.0 if (a, b) == (2, 0) else 100.0,
        )
        for a in range(3)
        for b in range(3)
        if a != b
    ]
    recs += [
        _rec(
            pattern="pingpong",
            variant="send_recv",
            size_bytes=64,
            src=0,
            dst=b,
            time_us=10.0,
            cross_node=cross(ctx, 0, b),
        )
        for b in (1, 2)
    ]
    text = format_tables(recs)
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("       ")}
    assert "500.0*!" in rows["2"]  # cross-node and > 1.5x the median
    assert "100.0*" in rows["0"] and "100.0  " in rows["0"]  # 0->2 cross-node, 0->1 not
    assert "0<->2 x" in text and "0<->1 x" not in text


@pytest.mark.parametrize("world", [2, 3, 4])
def test_producer_records_use_the_collectives_size_and_factor(world):
    # The producer's scatter and broadcast (and the isend fan-outs they are compared with) are
    # recorded as the collectives experiment records scatter and broadcast: size_bytes = the whole
    # buffer S, busbw = S / t x the nccl-tests factor of OP_TABLE, so the two busbw agree for the
    # same buffer and the same time.
    from experiments.collectives import cases as collectives
    from suite.results import CheckOutcome, RecordCase, make_record
    from suite.measurement import Measurement

    cfg = build_config(min_bytes="1K", max_bytes="64K", step_factor="4", dtypes="float32")
    coll = {
        (c.identity["variant"], c.bytes.size_bytes): c
        for c in collectives.cases(cfg, world)
        if c.identity["variant"] in ("scatter", "broadcast")
    }
    prod = [c for c in experiment.cases(cfg, world) if c.identity["pattern"] == "producer"]
    m = Measurement(
        samples_s=[1e-4] * 5, timing_mode="blocking", ops_per_sample=1, warmup_iters=0, precision_reached=None
    )
    like = {
        "scatter": "scatter",
        "isend_each_distinct": "scatter",
        "broadcast": "broadcast",
        "isend_each_same": "broadcast",
    }
    matched = 0
    for c in prod:
        ref = coll.get((like[c.identity["variant"]], c.bytes.size_bytes))
        assert ref is not None, f"{c.label}: no collectives case with the same whole buffer"
        assert (c.bytes.size_bytes, c.bytes.count, c.bytes.bw_op) == (
            ref.bytes.size_bytes,
            ref.bytes.count,
            ref.bytes.bw_op,
        ), c.label
        recs = [
            make_record(
                case=RecordCase(experiment=x.experiment, op=x.op, backend="gloo", device="cpu", world_size=world),
                size=x.bytes,
                m=m,
                check=CheckOutcome(wrong=(0, 0)),
            )
            for x in (c, ref)
        ]
        assert recs[0]["busbw_gbps"] == pytest.approx(recs[1]["busbw_gbps"]), c.label
        assert recs[0]["busbw_factor"] == pytest.approx(metrics.busbw_factor(like[c.identity["variant"]], world))
        matched += 1
    assert matched == len(prod) > 0
    # each consumer of a scatter gets size / world bytes, of a broadcast the whole buffer
    for c in prod:
        per = (
            c.bytes.size_bytes // world
            if c.identity["variant"] in ("scatter", "isend_each_distinct")
            else c.bytes.size_bytes
        )
        assert c.fields["consumer_bytes"] == per and c.fields["delivered_bytes"] == (world - 1) * per


def test_pingpong_and_constants_are_named_in_the_declaration():
    cfg = build_config(min_bytes="1K", max_bytes="1M", step_factor="4")
    cs = experiment.cases(cfg, 2)
    pp = [c for c in cs if c.identity["pattern"] in ("pingpong", "pair_matrix")]
    assert pp and all(c.resolve is not None and c.fields["latency_formula"] == "sample / (2K)" for c in pp)
    win = [c for c in cs if c.identity["pattern"] == "window" and "beyond_sweep" not in c.identity]
    assert all(
        c.fields["window_default"] == window.WINDOW == 64 and c.fields["window_max_bytes"] == window.WINDOW_MAX_BYTES
        for c in win
    )
    assert {c.identity["window"] for c in win} == {min(64, window.WINDOW_MAX_BYTES // (1 << 20)), 64}
    # the link probe's steps beyond the sweep: x4 up to the cap, their window within the probe's memory bound
    probe = [c for c in cs if c.identity.get("beyond_sweep")]
    assert sorted({c.bytes.size_bytes for c in probe}) == [4 << 20, 16 << 20, 64 << 20]
    assert all(
        c.identity["window"] * c.bytes.size_bytes <= max(link_probe.PROBE_WINDOW_BYTES, c.bytes.size_bytes)
        for c in probe
    )
    assert all(c.fields["table"] == "link_probe" and c.resolve is not None for c in probe)
    assert all(c.fields["k_counts"] == list(batching.BATCH_COUNTS) for c in cs if c.identity["pattern"] == "batching")


def test_window_bandwidth_counts_one_direction_and_names_the_aggregate():
    """Every p2p record's algbw counts one direction (as ring, exchange and placement pairs do): the
    bidirectional window's time is per message of one direction (iteration / window, both directions at
    once) and its both-ways bandwidth is a named field, not algbw."""
    cfg = build_config(min_bytes="1K", max_bytes="4K", step_factor="4")
    win = [c for c in experiment.cases(cfg, 2) if c.identity["pattern"] == "window"]
    assert {c.identity["variant"] for c in win} == {"unidirectional", "bidirectional"}
    for c in win:
        assert c.timing.divisor == c.identity["window"] and c.bytes.bw_op == "send_recv"
        bi = c.identity["variant"] == "bidirectional"
        assert ("aggregate_algbw_gbps" in c.provenance) is bi
        assert ("both directions at once" in c.timing.normalisation) is bi


def test_every_number_of_the_deadlock_probe_has_its_provenance():
    """The exchange record holds the probe's results as deadlock_<field>: each number says how it was obtained
    (the probe's configuration, floor_s, slack, limits, is recorded as such and claims nothing)."""
    from suite.ops.p2p import deadlock

    config = {"floor_s", "slack", "blocked_factor", "probe_sizes", "start_limit_s", "total_limit_s"}
    numeric = {
        f.name
        for f in dataclasses.fields(deadlock.ProbeResult)
        if any(t in str(f.type) for t in ("int", "float")) and f.name not in config
    }
    assert {"elapsed_s", "no_progress_for_s", "blocked_from_bytes", "correct_orderings_bytes"} <= numeric
    assert {"deadlock_" + n for n in numeric} <= set(deadlock.PROVENANCE)
    assert all(v.split(":")[0] in ("measured", "derived", "modelled") for v in deadlock.PROVENANCE.values())


def test_the_probe_pairs_payloads_are_exact_and_tell_every_element_apart(monkeypatch):
    """The pair's payloads (deadlock_child.payload, arange-built): exact float32 integers, rank r's at index i
    ``r x period + i mod period + 1``: distinct across both processes at every probe size (a missing, stale,
    shifted or crossed element reads wrong), each size's the first elements of a larger one's; past a period they
    repeat, still exact."""
    from suite.ops.p2p import deadlock, deadlock_child

    def expected(rank, start, stop, period):
        return torch.arange(start, stop, dtype=torch.int64) % period + rank * period + 1

    big = deadlock.PROBE.sizes[-1] // 4
    assert big <= deadlock_child.PAYLOAD_PERIOD <= 2**23  # both ranks' values distinct, and below 2^24: exact
    for rank in (0, 1):
        got = deadlock_child.payload(rank, big)
        assert got.dtype == torch.float32 and got.shape == (big,)
        for start in (0, big - 1000):  # float32's steps widen towards the top
            want = expected(rank, start, start + 1000, deadlock_child.PAYLOAD_PERIOD)
            assert torch.equal(got[start : start + 1000].to(torch.int64), want)
        assert torch.equal(deadlock_child.payload(rank, 1000), got[:1000])
    monkeypatch.setattr(deadlock_child, "PAYLOAD_PERIOD", 8)
    assert deadlock_child.payload(1, 21).tolist() == expected(1, 0, 21, 8).tolist()


@pytest.mark.parametrize("world", [3, 4])
def test_pair_patterns_report_only_the_ranks_that_take_part(world):
    # ping-pong: the initiator's clock (OSU); other pair patterns: their two ranks; the rest: every rank
    cfg = build_config(min_bytes="1K", max_bytes="1M", step_factor="4")
    for c in experiment.cases(cfg, world):
        pattern, src, dst = c.identity["pattern"], c.identity["src"], c.identity["dst"]
        if pattern in ("pingpong", "pair_matrix"):
            assert c.timing.rank_fields_of == (src,) and "initiator" in c.provenance["rank_median_us"], c.label
        elif pattern in ("window", "batching", "exchange"):
            assert c.timing.rank_fields_of == ((0, 1) if pattern == "exchange" else (src, dst)), c.label
            assert "takes part" in c.provenance["rank_median_us"]
        else:
            assert c.timing.rank_fields_of is None, c.label


def test_deadlock_bound_scales_with_the_expected_transfer_time():
    from suite.ops.p2p.deadlock import DeadlockProbe

    pr = DeadlockProbe(floor_s=1.0, slack=10.0)
    assert pr.bound_s(4, 1e9) == 1.0  # the floor
    assert pr.bound_s(16 << 20, 10e6) == pytest.approx(10 * (16 << 20) / 10e6)  # slack x size / rate
    assert pr.bound_s(16 << 20, 100e6) < pr.bound_s(16 << 20, 10e6)


# --- a pattern is one file and one PATTERNS line ----------------------------------------------------


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_pattern_declares_exactly_its_own_variants(world):
    # Pattern.variants is the one list of a pattern's variants: what it declares, and (below) the table's
    # columns; EXPECTED_VARIANTS, written out above, is what they must be.
    cfg = build_config(min_bytes="1K", max_bytes="1M", step_factor="4")
    cases = experiment.cases(cfg, world)
    for name, pat in p2p.PATTERNS.items():
        assert pat.name == name
        assert {c.identity["variant"] for c in cases if c.identity["pattern"] == name} == set(pat.variants), name
    assert {n: set(p.variants) for n, p in p2p.PATTERNS.items()} == EXPECTED_VARIANTS


def _fanfare(monkeypatch) -> Pattern:
    """A pattern that only PATTERNS knows of, as a new file would add it (its builder is never called)."""

    def declare(cfg, n, sw, experiment):
        return [
            make_case(
                pat,
                Spec(pattern=pat.name, variant=v, size_bytes=sz, dtype=sw.dtype),
                "one fanfare",
                experiment=experiment,
            )
            for v in pat.variants
            for sz in sw.ends
        ]

    pat = Pattern(name="fanfare", variants=("loud", "soft", "muted"), build=lambda ctx, s: None, declare=declare)
    monkeypatch.setitem(p2p.PATTERNS, pat.name, pat)
    return pat


def test_a_pattern_in_PATTERNS_alone_is_declared_and_has_its_table(monkeypatch):
    pat = _fanfare(monkeypatch)
    cfg = build_config(min_bytes="1K", max_bytes="4K", step_factor="4")
    mine = [c for c in experiment.cases(cfg, 2) if c.identity["pattern"] == "fanfare"]
    assert [c.label for c in mine] == [f"fanfare-{v}-{sz}B" for v in pat.variants for sz in (1024, 4096)]
    assert all(c.experiment == "p2p" and c.op == "send_recv" for c in mine)
    recs = [
        _rec(pattern="fanfare", variant=v, size_bytes=sz, time_us=t)
        for sz in (1024, 4096)
        for v, t in zip(pat.variants, (30.0, 10.0, 20.0))
    ]
    text = format_tables(recs)
    header = [line for line in text.splitlines() if "fanfare" in line]
    assert len(header) == 1 and header[0].startswith("# p2p fanfare"), text
    columns = text.splitlines()[1].split()  # "#", "size(B)", the variants, "fastest", "speed-up"
    assert columns[2:-2] == list(pat.variants), text  # one column per variant, in the pattern's order
    assert all(" soft" in line and "3.00x" in line for line in text.splitlines()[3:5]), text  # soft: 3x loud


def test_the_table_has_a_section_for_every_pattern():
    # One record per (pattern, variant) with the fields its section reads: every pattern's title shows.
    fields = {"window": 64, "steps": 8, "k_messages": 8, "message_bytes": 64, "src": 0, "dst": 1}
    own = {  # what a pattern's records say of their variant, which its table reads
        **{v: {"directions": i + 1} for i, v in enumerate(p2p.PATTERNS["window"].variants)},
        **{v: {"barrier_each_step": v != "no_barrier"} for v in p2p.PATTERNS["barrier_cost"].variants},
        **{v: {"size_definition": "the buffer"} for v in p2p.producer.SAME},
        **{v: {"size_definition": "chunk x ranks"} for v in p2p.producer.DISTINCT},
    }
    recs = [
        _rec(pattern=name, variant=v, size_bytes=64, time_us=10.0, **fields, **own.get(v, {}))
        for name, pat in p2p.PATTERNS.items()
        for v in pat.variants
    ]
    titles = [line for line in format_tables(recs).splitlines() if line.startswith("# p2p ")]
    for words in ("ping-pong", "pair matrix", "window", "ring", "deadlock", "producer", "control", "barrier", "batch"):
        assert sum(words in t for t in titles) >= 1, (words, titles)
    assert len(titles) == len(p2p.PATTERNS) + 1  # the producer has two tables: same data, a chunk each


def test_the_window_table_reads_directions_and_a_run_stored_without_them():
    per = "iteration / window 64: time per message of one direction"
    recs = [
        _rec(pattern="window", variant=v, size_bytes=64, time_us=t, window=64, src=0, dst=1, directions=d,
             time_normalisation=per + (" (both directions at once); algbw = one direction" if d == 2 else ""))
        for v, t, d in (("unidirectional", 10.0, 1), ("bidirectional", 30.0, 2))
    ]  # fmt: skip
    rows = [line for line in format_tables(recs).splitlines() if line.startswith("          64")]
    assert len(rows) == 1 and rows[0].split()[2] == "10.0" and rows[0].split()[4] == "30.0", rows
    older = [{k: v for k, v in r.items() if k != "directions"} for r in recs]  # the fields of an older run
    oldest = [{k: v for k, v in r.items() if k != "time_normalisation"} for r in older]  # ... and older still
    assert format_tables(older) == format_tables(oldest) == format_tables(recs)
    # an older run holding only the bidirectional records (the other variant skipped or failed): still bi
    only_bi = [r for r in older if r["variant"] == "bidirectional"]
    row = next(line for line in format_tables(only_bi).splitlines() if line.startswith("          64")).split()
    assert row[2] == "-" and row[4] == "30.0", row


@pytest.mark.parametrize("name", ["ring", "control", "batching"])
def test_the_comparison_columns_are_the_patterns_variants(name):
    # The table spells no variant list: its columns are the variants in the order the records ran (the
    # pattern's own order); run them the other way round and the columns follow.
    order = tuple(reversed(p2p.PATTERNS[name].variants))
    recs = [
        _rec(pattern=name, variant=v, size_bytes=64, time_us=10.0, k_messages=8, message_bytes=64, src=0, dst=1)
        for v in order
    ]
    lines = format_tables(recs).splitlines()
    assert [w[:20] for w in lines[1].split()[2:-2]] == [v[:20] for v in order], lines[1]


def test_a_variant_that_did_not_run_keeps_its_column():
    # The cases say which variants share their table (``columns``: the pattern's, the producer's per meaning
    # of the size), so a variant skipped on this backend shows "-" rather than vanishing from the table.
    cfg = build_config(min_bytes="1K", max_bytes="1K", step_factor="4")
    cases = [c for c in experiment.cases(cfg, 2) if c.identity.get("pattern") in ("batching", "producer")]
    recs = [
        _rec(
            **{**c.identity, **c.fields},
            size_bytes=c.bytes.size_bytes,
            size_definition=c.bytes.definition,
            time_us=10.0,
        )
        for c in cases
        if c.identity["variant"] not in ("batch_isend_irecv", "scatter")  # as if this backend skipped them
    ]
    tables = format_tables(recs).split("\n\n")
    batching = next(t for t in tables if "batching:" in t).splitlines()
    assert [w[:20] for w in batching[1].split()[2:-2]] == list(p2p.PATTERNS["batching"].variants)
    assert batching[3].split()[1:5] == ["10.0<", "10.0", "-", "10.0"], batching[3]
    chunk = next(t for t in tables if "own chunk" in t or "distinct" in t).splitlines()
    assert "scatter" in chunk[1] and "broadcast" not in chunk[1], chunk[1]


def test_the_experiment_that_declares_the_patterns_names_their_cases():
    # suite/ops/p2p/ names no experiment: p2p and the doctor pass theirs, down to the one-rank placeholder
    # (the doctor's was labelled "p2p-pass1").
    from experiments.doctor import cases as doctor

    cfg = build_config(min_bytes="1K", max_bytes="4K", step_factor="4")
    for mod in (experiment, doctor):
        assert {c.experiment for c in mod.cases(cfg, 2)} == {mod.EXPERIMENT}
        (alone,) = mod.cases(cfg, 1)
        assert alone.experiment == mod.EXPERIMENT and alone.label.split("-")[0] == mod.EXPERIMENT, alone.label
        assert "at least 2 ranks" in alone.skip(None, cfg)
