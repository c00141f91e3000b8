"""Single-process tests of the DDP experiment's pure parts: model sizing, knobs, case list, byte model,
check rule, tables, profiler trace writing and peak-memory measurement."""

import dataclasses
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments.ddp import cases as ddp_exp
from experiments.ddp import derived as ddp_derived

from experiments.ddp import buffer_bound
from experiments.ddp import check as ddp_check
from experiments.ddp import workload as ddp_exp_workload
from experiments.ddp import models as training
from experiments.sharded import check as sharded_check
from suite.common.flight_recorder import profile_env
from suite.harness import c10d, profiling
from suite.harness.sgd_rule import SgdRule
from suite.common.config import ConfigError, build_config
from suite.common.knobs import parse_count, settings_from_env
from experiments.ddp import table as ddp_tables
from experiments.model_parallel import table as mp_tables
from suite.system import memory

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("params", [300_000, 2_000_000, 25_000_000])
def test_mlp_spec_hits_the_parameter_budget(params):
    spec = training.mlp_spec_for(params)
    assert spec.n_params == pytest.approx(params, rel=0.01)
    if params <= 2_000_000:  # building the 25M model would only cost time; the formula is checked above
        model = training.mlp(spec)
        assert sum(p.numel() for p in model.parameters()) == spec.n_params
        assert sum(b.numel() for b in model.buffers()) > 0  # BatchNorm: broadcast_buffers has work to do


def test_models_are_deterministic_per_seed():
    a, b, c = training.source_model(0), training.source_model(0), training.source_model(1)
    assert torch.equal(training.flat_params(a), training.flat_params(b))
    assert not torch.equal(training.flat_params(a), training.flat_params(c))
    d1, d2 = training.make_dataset(100), training.make_dataset(100)
    assert torch.equal(d1.tensors[0], d2.tensors[0]) and torch.equal(d1.tensors[1], d2.tensors[1])


@pytest.mark.parametrize("raw,expected", [("25M", 25_000_000), ("300k", 300_000), ("1.5M", 1_500_000), ("4096", 4096)])
def test_counts_take_suffixes(raw, expected):
    assert parse_count(raw, "X_SIZE") == expected


@pytest.mark.parametrize(
    "env,match",
    [
        ({"DDP_PARAMS": "lots"}, "DDP_PARAMS"),
        ({"DDP_BUCKETS_MB": "1,x"}, "DDP_BUCKETS_MB"),
        ({"DDP_ACCUM": "1"}, "DDP_ACCUM"),
        ({"DDP_HOOKS": "allreduce,nope"}, "DDP_HOOKS"),
        ({"DDP_BUCKET_FRACTIONS": "0.5,0"}, "DDP_BUCKET_FRACTIONS"),
        ({"MP_BATCH": "0"}, "MP_BATCH"),
        ({"DDP_TIMED_ONLY": "2"}, "DDP_TIMED_ONLY"),
    ],
)
def test_bad_knobs_are_rejected(env, match):
    with pytest.raises(ConfigError, match=match):
        build_config(**settings_from_env(env))


def test_knobs_reach_the_config_typed():
    cfg = build_config(
        **settings_from_env(
            {
                "DDP_PARAMS": "25M",
                "DDP_BUCKETS_MB": "1 2.5",
                "MP_IN": "64",
                "DDP_HOOKS": "sum, fp16_compress",
                "DDP_BUCKET_FRACTIONS": "0.25,4",
            }
        )
    )
    assert cfg.ddp.params == 25_000_000 and cfg.ddp.buckets_mb == (1.0, 2.5) and cfg.ddp.batch_per_rank == 32
    assert cfg.ddp.hooks == ("sum", "fp16_compress") and cfg.ddp.bucket_fractions == (0.25, 4.0)
    assert build_config(ddp=dict(cfg.as_dict()["ddp"])).ddp == cfg.ddp  # config.json round trip (lists)
    assert cfg.model_parallel.in_features == 64 and cfg.model_parallel.out_features == 2048


def test_case_list_covers_the_issue():
    cases = ddp_exp.variants(build_config(**settings_from_env({"DDP_BUCKETS_MB": "1,100"})).ddp)
    ids = [ddp_exp.case_id(c) for c in cases]
    assert len(ids) == len(set(ids))
    mlp = {c.label for c in cases if c.model == "mlp"}
    assert {
        "solo (1 rank)",
        "no communication",
        "ddp",
        "manual all_reduce",
        "manual coalesced",
        "ddp no-op hook (no comm)",
        "ddp bucket_cap=0.125x grad",
        "ddp bucket_cap=0.5x grad",
        "ddp bucket_cap=1x grad",
        "ddp bucket_cap=2x grad",
        "ddp bucket_cap_mb=1",
        "ddp bucket_cap_mb=100",
        "ddp gradient_as_bucket_view",
        "ddp static_graph",
        "ddp broadcast_buffers=False",
        "ddp hook allreduce",
        "ddp hook fp16_compress",
        "ddp hook bf16_compress",
        "ddp hook powerSGD",
        "accum x4 no_sync",
        "accum x4 sync each",
        "init: broadcast per tensor",
        "init: DDP constructor",
    } <= mlp
    # baselines come first so later cases can use them
    assert [(c.kind.name, c.hook) for c in cases[:4]] == [
        ("solo", None),
        ("local", None),
        ("all_reduce", None),
        ("ddp", ddp_exp_workload.NOOP),
    ]


def test_every_hook_choice_is_registered():
    from experiments.ddp.settings import DDP_HOOK_NAMES

    assert set(DDP_HOOK_NAMES) == {*ddp_exp_workload._HOOKS, "powerSGD", "sum", "fp16_scaled", "bn_skew"}


def test_bucket_caps_are_fractions_of_the_gradient():
    s = ddp_exp_workload.DdpSettings(params=2_000_000)
    grad = training.mlp_spec_for(s.params).n_params * 4
    caps = {
        c.bucket_fraction: ddp_exp_workload.variant_ddp_kwargs(c, s)["bucket_cap_mb"]
        for c in ddp_exp.variants(s)
        if c.bucket_fraction is not None
    }
    assert sorted(caps) == [0.125, 0.5, 1.0, 2.0]
    assert all(mb * 2**20 == pytest.approx(f * grad) for f, mb in caps.items())


def _variant(label, settings):
    return next(c for c in ddp_exp.variants(settings) if c.model == "mlp" and c.label == label)


def test_byte_model_counts_every_all_reduce_of_the_step():
    # sync each: one all_reduce of the whole gradient per micro-batch; no_sync: one per step
    s = ddp_exp_workload.DdpSettings(accum=4)
    grad = 4000
    each = ddp_exp.step_bytes(_variant("accum x4 sync each", s), grad, s)
    once = ddp_exp.step_bytes(_variant("accum x4 no_sync", s), grad, s)
    assert (each.size_bytes, each.count, each.bw_op) == (4 * grad, 4 * grad // 4, "all_reduce")
    assert (once.size_bytes, once.count) == (grad, grad // 4)
    assert "4 all_reduce(s)" in each.definition
    assert ddp_exp.step_bytes(_variant("ddp no-op hook (no comm)", s), grad, s).size_bytes == 0
    # a training step's time includes forward and backward: no nccl-tests busbw, an effective rate
    assert each.time_includes == once.time_includes == "forward, backward and the optimizer step"
    assert ddp_exp.step_bytes(_variant("grad all_reduce only", s), grad, s).time_includes is None


def test_every_number_a_ddp_step_records_has_its_provenance():
    s = ddp_exp_workload.DdpSettings(accum=4)
    ddp = ddp_derived.step_provenance(_variant("ddp", s), None)
    for k in ("n_buckets", "bucket_sizes", "bucket_cap_bytes", "check_steps", "ddp_logger_steps", "check_tol"):
        assert ddp[k].split(":")[0] in ("measured", "derived", "modelled"), k
    accum = ddp_derived.step_provenance(_variant("accum x4 no_sync", s), None)
    assert {"bucket_sizes", "bucket_cap_bytes", "check_steps"} <= set(accum) and "ddp_logger_steps" not in accum
    # no claim for numbers a case does not record: the bare all_reduce has no buckets and no reference check
    bare = ddp_derived.step_provenance(_variant("grad all_reduce only", s), None)
    assert not {"bucket_sizes", "bucket_cap_bytes", "check_steps", "ddp_logger_steps"} & set(bare)


def test_timed_only_leaves_the_training_steps_unchecked_with_no_baseline_numbers():
    """DDP_TIMED_ONLY=1 (the fail-slow bench's trials): a training step is unchecked, with the knob named as why,
    and claims none of the numbers its baseline steps give; the bare all_reduce keeps its exact check; by
    default every synchronised step is checked and derived."""
    on = build_config(**settings_from_env({"DDP_TIMED_ONLY": "1"})).ddp
    off = ddp_exp_workload.DdpSettings()
    ddp, bare = _variant("ddp", on), _variant("grad all_reduce only", on)
    assert "DDP_TIMED_ONLY=1" in ddp_check.unchecked_reason(ddp, on)
    assert ddp_check.unchecked_reason(bare, on) is None
    assert ddp_check.unchecked_reason(ddp, off) is None
    baseline = {"solo_step_ms", "scaling_efficiency", "local_step_ms", "noop_step_ms", "overlap_saved_pct"}
    timed = ddp_derived.step_provenance(ddp, ddp_check.unchecked_reason(ddp, on), baselines=False)
    assert not baseline & set(timed) and not {"check_steps", "check_tol"} & set(timed)
    assert {"n_buckets", "ddp_logger_steps", "peak_mem_bytes"} <= set(timed)
    assert baseline <= set(ddp_derived.step_provenance(ddp, None))


def _reference_at(s, steps: int, wire=lambda t: t):
    """The 4-rank single-process reference of the MLP after ``steps``, its average passed through ``wire``."""
    ref = ddp_check.Reference("mlp", s, 4, torch.device("cpu"), 1, False, True)
    mean = ref._mean
    ref._mean = lambda per_rank: [wire(t) for t in mean(per_rank)]
    return ref.at(steps)


def test_per_element_tolerance_fails_an_average_1_01_too_large_and_passes_the_fp16_wire():
    """A single tolerance for every parameter (its largest max|g| and max|p|) let an fp16-compressed average
    scaled by 1.01 through at 4 ranks; per element, the bound of each parameter catches it at the check step
    (one step: nothing carried from earlier steps, each element's own bound alone)."""
    s = ddp_exp_workload.DdpSettings(params=20_000)
    good, g_max, p_max, _ = _reference_at(s, 1)
    assert g_max.shape == p_max.shape == good.shape  # per element
    fp16 = _reference_at(s, 1, lambda t: t.half().float())[0]
    scaled = _reference_at(s, 1, lambda t: t.half().float() * 1.01)[0]
    rule = ddp_check.check_rule(_variant("ddp hook fp16_compress", s), 4)
    tol = rule.tol(1, g_max.double(), p_max.double())
    assert ((fp16 - good).abs().double() <= tol).all()  # the honest wire is inside the bound
    assert ((scaled - good).abs().double() > tol).sum() > 0  # 1.01 is not
    assert ((scaled - good).abs().max() <= rule.tol(1, g_max.max(), p_max.max())).item()  # one scalar: passes


def test_check_rule_is_exact_only_where_the_average_is():
    s = ddp_exp_workload.DdpSettings()
    plain, fp16 = _variant("ddp", s), _variant("ddp hook fp16_compress", s)
    assert ddp_check.check_rule(plain, 2).exact and ddp_check.check_rule(plain, 2).tol(25, 1.0, 1.0) == 0
    assert not ddp_check.check_rule(plain, 4).exact and not ddp_check.check_rule(fp16, 2).exact
    r4 = ddp_check.check_rule(plain, 4)
    # 2 x S x e + S x (S - 1) x e(the largest), e = lr x 2N x u x max|g| + 2 u max|p|, float32 u = 2^-24
    assert r4.tol(10, 1.0, 0.5) == pytest.approx((2 * 10 + 10 * 9) * (0.01 * 8 * 2**-24 + 2 * 2**-24 * 0.5))
    assert r4.tol(1, 1.0, 0.5) == pytest.approx(2 * (0.01 * 8 * 2**-24 + 2 * 2**-24 * 0.5))  # one step: its own
    assert ddp_check.check_rule(fp16, 2).tol(10, 1.0, 0.5) > 100 * ddp_check.check_rule(plain, 3).tol(10, 1.0, 0.5)
    assert r4.describe(10, 1.2e-6) == "tol per element, up to 1.2e-06 (float32 sum order, 4 ranks, 10 steps)"
    assert ddp_check.unchecked_reason(_variant("ddp hook powerSGD", s), s)
    assert ddp_check.unchecked_reason(_variant("ddp no-op hook (no comm)", s), s)
    assert ddp_check.unchecked_reason(_variant("solo (1 rank)", s), s) and not ddp_check.unchecked_reason(plain, s)


def test_powersgd_wire_bytes_estimate():
    model = training.mlp(training.mlp_spec_for(300_000))
    s = ddp_exp_workload.DdpSettings()
    full = training.grad_bytes(model)
    assert ddp_exp_workload.hook_wire_bytes(model, None, s) == full
    assert ddp_exp_workload.hook_wire_bytes(model, "fp16_compress", s) == full // 2
    assert 0 < ddp_exp_workload.hook_wire_bytes(model, "powerSGD", s) < full // 10


def _rec(**kw):
    base = dict(
        experiment="ddp",
        op="ddp_step",
        backend="gloo",
        device="cpu",
        dtype="float32",
        world_size=4,
        size_bytes=4000,
        count=1000,
        in_place=True,
        timing_mode="blocking",
        iterations=20,
        time_us=2000.0,
        p05_us=1900.0,
        p50_us=2000.0,
        p95_us=2500.0,
        p99_us=2600.0,
        algbw_gbps=0.002,
        busbw_gbps=0.003,
        n_wrong=0,
        checked=True,
        model="mlp",
        label="ddp",
        n_params=1000,
        batch_per_rank=32,
        samples_per_s=64000.0,
        scaling_efficiency=0.5,
        comm_exposed_ms=1.0,
        comm_added_ms=0.8,
        overlap_saved_ms=0.3,
        overlap_saved_pct=30.0,
        ddp_logger_comm_ms=1.5,
        ddp_logger_overlap_pct=40.0,
        n_buckets=3,
        peak_mem_bytes=300 * 2**20,
        check_rule="exact",
        check_tol=0.0,
    )
    base.update(kw)
    return base


def test_ddp_table_rows_and_units():
    none = dict(
        comm_added_ms=None,
        overlap_saved_ms=None,
        overlap_saved_pct=None,
        ddp_logger_comm_ms=None,
        ddp_logger_overlap_pct=None,
        n_buckets=None,
        comm_exposed_ms=None,
        check_rule=None,
    )
    recs = [
        _rec(
            op="solo_step",
            label="solo (1 rank)",
            size_bytes=0,
            peak_mem_bytes=None,
            checked=False,
            n_wrong=None,
            **none,
        ),
        _rec(),
        _rec(
            label="manual all_reduce",
            op="manual_allreduce_step",
            n_wrong=3,
            check_rule="tol 1.2e-06 (float32 sum order, 4 ranks, 25 steps)",
            check_tol=1.2e-6,
        ),
        _rec(op="broadcast", label="init: broadcast per tensor", n_tensors=8),
    ]
    text = ddp_tables.format_tables(recs)
    assert "# ddp: mlp model (0.00M params, 0.00 MB gradient/step), gloo, cpu, 4 ranks" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("ddp "))
    assert row.split() == [
        "ddp",
        "2.00",
        "2.50",
        "64000",
        "0.50",
        "1.00",
        "0.80",
        "0.30",
        "30",
        "1.50",
        "40",
        "0.003",
        "3",
        "300",
        "0",
        "exact",
    ]
    solo = next(line for line in text.splitlines() if "solo" in line)
    assert solo.split()[-12:] == ["-"] * 10 + ["not", "checked"]
    manual = next(line for line in text.splitlines() if "manual" in line)
    assert manual.split()[-3:] == ["3", "tol", "1.2e-06"]
    assert "FAILED" in text  # the manual row had wrong elements
    assert "initial-state broadcast from rank 0, mlp model (4000 B in 8 tensors)" in text


def test_model_parallel_table():
    recs = [
        _rec(experiment="model_parallel", op=op, in_features=8, out_features=8, global_batch=4)
        for op in ("scatter", "mp_train_step")
    ]
    text = mp_tables.format_tables(recs)
    assert "Linear(8, 8) split by output rows over 4 ranks, global batch 4" in text
    assert "#wrong total: 0 [OK]" in text


@pytest.mark.parametrize(
    "setting,nodeid,want",
    [
        ("", "x.py::t[a]", False),
        ("0", "x.py::t[a]", False),
        ("1", "x.py::t[a]", True),
        ("all", "x.py::t[a]", True),
        ("t[a", "x.py::t[a]", True),
        ("t[b", "x.py::t[a]", False),
    ],
)
def test_profile_selection(setting, nodeid, want):
    assert profiling.wanted(nodeid, {"SUITE_PROFILE": setting}) is want


def test_trace_path_is_per_rank_and_safe(tmp_path):
    p = profiling.trace_path(tmp_path, "experiments/ddp/cases.py::test_ddp[mlp-ddp bucket/1]", 3)
    assert p.parent == tmp_path / "profiles" and p.name == "test_ddp_mlp-ddp_bucket_1.rank3.json"


def test_a_profiled_run_switches_the_flight_recorder_on_unless_the_user_set_it():
    assert profile_env({"SUITE_PROFILE": "1"}, "2.13.0") == {"TORCH_FR_BUFFER_SIZE": "20000"}
    assert profile_env({"SUITE_PROFILE": "ddp"}, "2.4.1") == {"TORCH_NCCL_TRACE_BUFFER_SIZE": "20000"}
    assert profile_env({"SUITE_PROFILE": "1", "TORCH_FR_BUFFER_SIZE": "5"}, "2.13.0") == {}
    assert profile_env({}, "2.13.0") == {} and profile_env({"SUITE_PROFILE": "0"}, "2.13.0") == {}


def test_the_cases_collectives_are_those_the_flight_recorder_saw_issued_while_it_ran(monkeypatch):
    """profiling.c10d_ops on a dump as torch 2.13 writes it (the fields it reads): the collectives issued inside the
    window, in issue order; a send (its own counter) and the ops before and after left out."""

    def entry(rid, pg, seq, name, t, p2p=False):
        return {"record_id": rid, "process_group": (pg, "undefined"), "collective_seq_id": seq, "is_p2p": p2p} | {
            "profiling_name": f"gloo:{name}",
            "time_created_ns": t,
        }

    dump = {
        "entries": [
            entry(0, "0", 1, "barrier", 5),
            entry(2, "3", 2, "all_reduce", 20),
            entry(1, "1", 1, "all_gather", 15),
        ]
    }
    dump["entries"] += [entry(3, "0", 0, "send", 25, p2p=True), entry(4, "0", 2, "barrier", 40)]
    monkeypatch.setattr(c10d, "flight_recorder_dump", lambda: pickle.dumps(dump))
    assert profiling.c10d_ops(10, 30) == [
        {"pg": "1", "seq": 1, "op": "all_gather", "issued_ns": 15, "op_id": 0},
        {"pg": "3", "seq": 2, "op": "all_reduce", "issued_ns": 20, "op_id": 0},
    ]
    monkeypatch.setattr(c10d, "flight_recorder_dump", lambda: None)
    assert profiling.c10d_ops(10, 30) == []


def test_profile_to_writes_a_chrome_trace(tmp_path):
    path = tmp_path / "t" / "trace.json"
    model = torch.nn.Linear(16, 4)
    pg = torch.distributed.ProcessGroup
    send, recv = vars(pg)["send"], vars(pg)["recv"]
    with profiling.profile_to(path):
        model(torch.randn(2, 16)).sum().backward()
        assert vars(pg)["send"] is not send  # the case's sends and recvs noted (c10d.p2p_calls)
    # and no more: the class's own descriptors back, so a group's send and recv still bind the group (a later
    # case's pg.send(tensors, dst, tag) otherwise reached pybind11 without its group: "incompatible arguments")
    assert (vars(pg)["send"], vars(pg)["recv"]) == (send, recv)
    trace = json.loads(path.read_text())
    assert any("linear" in e.get("name", "").lower() or "addmm" in e.get("name", "") for e in trace["traceEvents"])


_PEAK_PROBE = """
import json, torch
from suite.harness import profiling
with profiling.PeakMemory(torch.device("cpu")) as small:
    pass
with profiling.PeakMemory(torch.device("cpu")) as big:
    x = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
    del x
print(json.dumps([small.kind, small.peak_bytes, big.kind, big.peak_bytes]))
"""


def test_peak_memory_sees_an_allocation():
    # In a fresh process: deep in a test session the allocator can hand a 64 MiB tensor resident pages an
    # earlier test freed, so the region adds no page to RSS and its peak rightly equals the empty region's
    # (CI's Docker run of make test-cpu, twice). A new interpreter has freed nothing that large.
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    _, small_peak, kind, peak = json.loads(out.stdout.strip().splitlines()[-1])
    assert kind in ("cpu_peak_rss", "cpu_peak_rss_since_start") and peak > 0
    if kind == "cpu_peak_rss":  # resettable: the region's own peak
        assert peak >= small_peak + 32 * 2**20


def test_a_reset_that_does_not_take_effect_is_not_called_a_region_peak(tmp_path, monkeypatch):
    # A sandbox that accepts the write to clear_refs and ignores it (CI's Docker run) leaves the
    # process's earlier peak in place: the region's number must then say "since start".
    x = torch.ones(96 * 2**20 // 4)  # raise this process's peak well above what stays resident
    del x
    monkeypatch.setattr(memory, "_CLEAR_REFS", str(tmp_path / "clear_refs"))  # accepted, no effect
    with profiling.PeakMemory(torch.device("cpu")) as pm:
        pass
    assert pm.kind == "cpu_peak_rss_since_start"
    assert pm.peak_bytes >= 96 * 2**20


def test_reference_replays_steps_it_has_passed():
    # Reference is pure single-process training: asking for fewer steps than it has taken restarts it
    s = ddp_exp_workload.DdpSettings(params=20_000)
    ref = ddp_check.Reference("mlp", s, 2, "cpu", 1, False, True)
    p1, g1, _, _ = (t.clone() for t in ref.at(1))
    p3 = ref.at(3)[0].clone()
    ref._snapshots.clear()
    assert torch.equal(ref.at(1)[0], p1) and torch.equal(ref.at(3)[0], p3) and not torch.equal(p1, p3)
    assert (g1 >= 0).all() and g1.max() > 0  # per element: the largest averaged term so far


def test_reference_resumes_from_its_checkpoint_below_a_smaller_step_count():
    """Cases take different step counts (each its own sample budget): one asking for fewer steps than the
    reference has taken resumes from the checkpoint below, bit-identical to training from step 0, in at most
    CHECKPOINT_EVERY - 1 steps (from step 0 it retrained 12 of them each time)."""
    s = ddp_exp_workload.DdpSettings(params=20_000)
    args = ("mlp", s, 2, "cpu", 1, False, True)
    ref = ddp_check.Reference(*args)
    ref.at(13)
    taken, step = [], ref._step
    ref._step = lambda: (taken.append(1), step())[1]
    got = [t.clone() for t in ref.at(12)]
    assert len(taken) == 12 - 2 * ddp_check.CHECKPOINT_EVERY  # from the checkpoint at step 10
    fresh = ddp_check.Reference(*args).at(12)
    assert all(torch.equal(a, b) for a, b in zip(got, fresh, strict=True))
    assert not torch.equal(got[0], ddp_check.Reference(*args).at(11)[0])


def test_reference_checkpoints_are_counted_with_every_tensor_they_hold(monkeypatch):
    # A checkpoint holds the net's state, the optimizer's, every rank's buffers, max|g| and max|p|; the cap
    # counts them all (it once counted the net's state and max|g|, max|p| only: every rank's buffers and an
    # optimizer's momentum were over the cap unseen).
    assert training.tensor_bytes(
        ({"w": torch.zeros(4)}, {"state": {0: {"momentum_buffer": torch.zeros(3, dtype=torch.float64)}}}, [[]], 1)
    ) == (4 * 4 + 3 * 8)
    s = ddp_exp_workload.DdpSettings(params=20_000)
    ref = ddp_check.Reference("mlp", s, 4, "cpu", 1, False, True)
    ref.at(ddp_check.CHECKPOINT_EVERY)
    (first,) = ref._checkpoints.values()
    monkeypatch.setattr(ddp_check, "CHECKPOINT_BYTES", 2 * training.tensor_bytes(first) - 1)
    ref.at(2 * ddp_check.CHECKPOINT_EVERY)
    assert list(ref._checkpoints) == [2 * ddp_check.CHECKPOINT_EVERY]  # two would be over the cap


def _forwards_from(s, params, bufs, batches):
    """An independent replay of one rank's forwards: the MLP at flat ``params``, its buffers set to the flat
    ``bufs``, then a training-mode forward of each batch; its flat buffers afterwards."""
    net = ddp_exp_workload.build_model("mlp", s, seed=0)
    torch.nn.utils.vector_to_parameters(params, net.parameters())
    i = 0
    with torch.no_grad():
        for b in net.buffers():
            b.copy_(bufs[i : i + b.numel()].view_as(b).to(b.dtype))
            i += b.numel()
        for x, _ in batches:
            net(x)
    return ddp_check.flat_buffers(list(net.buffers()))


@pytest.mark.parametrize("sync", [True, False])
def test_reference_buffers_are_each_ranks_own_or_start_from_rank_0s_at_every_forward(sync):
    """broadcast_buffers: every forward starts from rank 0's buffers, then the rank's own batch moves them;
    without it (and in the manual cases) each rank's running stats evolve from its own batches alone."""
    s = ddp_exp_workload.DdpSettings(params=20_000)
    ref = ddp_check.Reference("mlp", s, 2, "cpu", 1, False, sync)
    batches = [ddp_exp_workload.rank_batches(r, s, 1, "cpu") for r in range(2)]
    for k in (1, 2, 3):
        before, after = (tuple(t.clone() for t in ref.at(j)) for j in (k - 1, k))
        for r in range(2):
            start = before[3][0] if sync else before[3][r]
            assert torch.equal(after[3][r], _forwards_from(s, before[0], start, batches[r])), (k, r)
    bufs = ref.at(3)[3]
    assert not torch.equal(bufs[0], bufs[1])  # different batches, different running stats
    assert (bufs[:, -1] == 3).all()  # num_batches_tracked (the last buffer): one forward per step


def test_the_two_buffer_modes_differ_only_in_the_other_ranks_buffers():
    """What a check expecting broadcast buffers would see of broadcast_buffers=False: the same parameters and
    rank 0's buffers, rank 1's running stats different from the second step on."""
    s = ddp_exp_workload.DdpSettings(params=20_000)
    synced, local = (ddp_check.Reference("mlp", s, 2, "cpu", 1, False, m) for m in (True, False))
    for k in (1, 3):
        a, b = synced.at(k), local.at(k)
        assert torch.equal(a[0], b[0]) and torch.equal(a[3][0], b[3][0])
        assert torch.equal(a[3][1], b[3][1]) == (k == 1)  # the first forward starts from the same init


def test_under_no_sync_buffers_are_broadcast_before_the_first_micro_batch_only():
    """DDP syncs buffers at a forward only when the previous forward synchronised gradients: under no_sync,
    before the first micro-batch of a step; without no_sync, before every one."""
    s = ddp_exp_workload.DdpSettings(params=20_000)
    batches = ddp_exp_workload.rank_batches(1, s, 2, "cpu")
    ref = ddp_check.Reference("mlp", s, 2, "cpu", 2, False, True)
    before, after = (tuple(t.clone() for t in ref.at(j)) for j in (1, 2))
    assert torch.equal(after[3][1], _forwards_from(s, before[0], before[3][0], batches))
    each = ddp_check.Reference("mlp", s, 2, "cpu", 2, True, True)
    before, after = (tuple(t.clone() for t in each.at(j)) for j in (1, 2))
    assert not torch.equal(after[3][1], _forwards_from(s, before[0], before[3][0], batches))
    assert (after[3][:, -1] == 4).all()


def test_buffer_rule_is_exact_where_the_parameters_are_and_says_whose_buffers():
    s = ddp_exp_workload.DdpSettings()
    plain, local, manual = (_variant(x, s) for x in ("ddp", "ddp broadcast_buffers=False", "manual all_reduce"))
    assert ddp_check.syncs_buffers(plain) and not ddp_check.syncs_buffers(local) and not ddp_check.syncs_buffers(manual)
    assert ddp_check.buffer_rule(plain, ddp_check.check_rule(plain, 2)).startswith("exact (rank 0's")
    assert ddp_check.buffer_rule(local, ddp_check.check_rule(local, 2)) == "exact (the rank's own batches)"
    tol = ddp_check.check_rule(plain, 4)
    assert ddp_check.buffer_rule(plain, tol).startswith("exact after the one-step check (rank 0's")
    assert "after the timed steps within a bound per element" in ddp_check.buffer_rule(plain, tol)
    assert "not compared after the timed steps" in ddp_check.buffer_rule(plain, tol, bounded=False)
    # which checks compare them: every one under the exact rule or a bound, else the one-step check alone
    exact = ddp_check.check_rule(plain, 2)
    assert [ddp_check.buffers_compared(r, n) for r in (exact, tol) for n in (1, 5)] == [True, True, True, True]
    assert [ddp_check.buffers_compared(tol, n, bounded=False) for n in (1, 5)] == [True, False]
    assert buffer_bound.bn_after_linear(ddp_exp_workload.build_model("mlp", s, seed=0)) is not None
    assert buffer_bound.bn_after_linear(ddp_exp_workload.build_model("source", s, seed=0)) is None


class _OtherOrder(ddp_check.Reference):
    """The reference with the ranks' gradients averaged in reverse order: what a correct all_reduce that adds
    in another order trains (parameters within the float32 rule, not equal)."""

    def _mean(self, per_rank):
        return super()._mean(per_rank[::-1])


def test_the_running_stats_bound_holds_for_another_sum_order_and_fails_a_late_skew():
    # 4 ranks, DDP's buffer broadcast: a correct average in another order moves each rank's running stats by
    # rounding only, inside the bound after every step count; running_mean off by 5 x 2^-10 after 10 steps
    # (less than 2^-10 per step from the second step on leaves, its older moves decayed by the momentum, and
    # invisible to the one-step check) is beyond it. No bound after one step: the stats are exact.
    s = ddp_exp_workload.DdpSettings(params=50_000)
    rule = SgdRule(world=4, terms=4, u=2.0**-24, lr=0.01, exact=False, why="float32 sum order")
    ref = ddp_check.Reference("mlp", s, 4, "cpu", 1, False, True)
    other = _OtherOrder("mlp", s, 4, "cpu", 1, False, True)
    hidden = ref.bn[1].num_features
    bound = {}
    for steps in (1, 3, 25, 10):
        bufs, theirs, tol = ref.at(steps)[3], other.at(steps)[3], ref.buffer_tol(steps, rule)
        assert tol.shape == bufs.shape and (tol[:, -1] == 0).all()  # the batch count: exact
        assert ((theirs - bufs).abs() <= tol / 1000).all(), steps
        bound[steps] = tol[:, :hidden].max().item()
        if steps == 1:
            assert (tol == 0).all()
        else:
            assert (tol[:, : 2 * hidden] > 0).all()
    assert bound[10] == pytest.approx(1.3e-3, rel=0.05) and bound[25] == pytest.approx(6.5e-3, rel=0.05)  # docs
    ref.at(2)  # a case of fewer steps than any checkpoint: back to step 0; the bounds of earlier snapshots stay
    assert torch.equal(ref.buffer_tol(10, rule), tol) and (ref.buffer_tol(1, rule) == 0).all()
    skewed = (theirs + torch.cat([torch.full((hidden,), 2.0**-10 * 5), torch.zeros(hidden + 1)])).double()
    assert ((skewed - bufs).abs() > tol).any()
    assert ref.buffer_tol(10, ddp_check.check_rule(_variant("ddp", s), 2)) is None  # the exact rule: no bound


def test_ddp_and_the_sharded_ddp_strategy_share_one_rule_of_sgd_steps():
    # both average float32 gradients over the world: one rule (suite/harness/sgd_rule.py), the same bound from
    # the same numbers, per element here and per parameter tensor there
    plain = ddp_check.check_rule(_variant("ddp", ddp_exp_workload.DdpSettings(params=50_000)), 4)
    sharded = sharded_check.check_rule("ddp", 4)
    assert dataclasses.replace(sharded, lr=plain.lr, per=plain.per) == plain
    g, p = [0.5, 2.0], [1.0, 3.0]
    assert plain.tol(3, 2.0, 3.0) == max(plain.tols(3, g, p)) > plain.tol(3, 0.5, 1.0, plain.step_term(2.0, 3.0))
    assert plain.tol(1, 0.5, 1.0) == 2 * plain.step_term(0.5, 1.0)  # no coupling after one step


def test_the_reference_trained_in_turns_is_the_reference_trained_at_once():
    # one step per turn (a deadline already past), a rewind between: the same parameters, bounds and buffers
    s = ddp_exp_workload.DdpSettings(params=5_000)
    args = ("mlp", s, 2, "cpu", 1, False, True)
    ref = ddp_check.Reference(*args)
    turns = 1
    while not ref.advance(6, deadline=0.0):
        turns += 1
    assert turns == 6 and ref.advance(6, deadline=0.0)
    whole = ddp_check.Reference(*args).at(6)
    assert all(torch.equal(a, b) for a, b in zip(ref.at(6), whole))
    turns = 1
    while not ref.advance(4, deadline=0.0):  # fewer steps: back to a fresh model (its checkpoint is at 5)
        turns += 1
    assert turns == 4 and torch.equal(ref.at(4)[0], ddp_check.Reference(*args).at(4)[0])
