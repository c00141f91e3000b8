"""The model-parallel experiment's pure parts: the pipeline models against hand-computed timelines and
an event simulation of each schedule, the stage layer, the train steps' check rule and its tolerance,
the knobs, and the tables."""

import itertools
import math

import pytest
import torch

from experiments.model_parallel import cases as mp

from experiments.model_parallel import workload as mp_workload

from experiments.model_parallel import model as mp_model

from experiments.model_parallel import derived as mp_derived

from experiments.model_parallel import check as mp_check
from experiments.model_parallel.settings import ModelParallelSettings
from suite.common.config import BenchConfig, ConfigError, build_config
from suite.common.knobs import settings_from_env
from experiments.model_parallel import table as tables


# --- pipeline models ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule,s,m,c,tau,want",
    [
        # blocking, S = 3, M = 2 (the timeline in pipeline_time_s's docstring): 4c + 4tau
        ("blocking", 3, 2, 1.0, 0.5, 6.0),
        # blocking, S = 2: each stage one transfer per micro-batch: 2c + tau + (M-1)(c + tau)
        ("blocking", 2, 3, 1.0, 1.0, 7.0),
        # blocking, S = 4, M = 8: 4c + 3tau + 7(c + 2tau) = 11c + 17tau
        ("blocking", 4, 8, 2.0, 1.0, 39.0),
        # overlap, compute-bound: (M + S - 1)c + (S - 1)tau
        ("overlap", 3, 4, 2.0, 1.0, 14.0),
        # overlap, transfer-bound: S c + (S - 1)tau + (M - 1)tau
        ("overlap", 3, 4, 1.0, 2.0, 13.0),
        # one stage: M computes, no transfer
        ("blocking", 1, 5, 1.5, 9.0, 7.5),
        ("overlap", 1, 5, 1.5, 9.0, 7.5),
    ],
)
def test_pipeline_time_matches_hand_computed_timelines(schedule, s, m, c, tau, want):
    assert mp_model.pipeline_time_s(schedule, s, m, c, tau) == pytest.approx(want)


def _simulate(schedule: str, stages: int, microbatches: int, c: float, tau: float) -> float:
    """Event simulation of the schedules as the experiment issues them (max-plus recurrences), in
    micro-batch order, stage by stage: done[s][j] = stage s has computed j, sent[s][j] = micro-batch j
    has crossed link s -> s+1.

    blocking: stage s is free for j once it finished j-1 (its send, or its compute on the last stage);
    a transfer starts when the sender has computed j and the receiver is free for j, and holds both
    for tau. overlap: the receiver's irecv is posted long before, so a transfer starts when the sender
    has computed j and the link has carried j-1; a stage computes j once it has arrived and j-1 is done.
    """
    last = stages - 1
    done = [[0.0] * microbatches for _ in range(stages)]
    sent = [[0.0] * microbatches for _ in range(stages)]

    def free(s: int, j: int) -> float:
        return 0.0 if j == 0 else (sent[s][j - 1] if s < last else done[s][j - 1])

    for j in range(microbatches):
        for s in range(stages):
            if schedule == "blocking":
                done[s][j] = (sent[s - 1][j] if s else free(s, j)) + c
                if s < last:
                    sent[s][j] = max(done[s][j], free(s + 1, j)) + tau
            else:
                done[s][j] = max(sent[s - 1][j] if s else 0.0, done[s][j - 1] if j else 0.0) + c
                if s < last:
                    sent[s][j] = max(done[s][j], sent[s][j - 1] if j else 0.0) + tau
    return done[last][microbatches - 1]


@pytest.mark.parametrize("schedule", mp.SCHEDULES)
def test_pipeline_time_agrees_with_an_event_simulation(schedule):
    for s, m, (c, tau) in itertools.product(range(1, 6), range(1, 9), [(1.0, 0.3), (1.0, 1.0), (0.4, 1.0)]):
        assert mp_model.pipeline_time_s(schedule, s, m, c, tau) == pytest.approx(_simulate(schedule, s, m, c, tau)), (
            schedule,
            s,
            m,
            c,
            tau,
        )


@pytest.mark.parametrize("s,m", [(2, 1), (3, 4), (4, 8)])
def test_without_transfer_both_schedules_are_compute_only_gpipe(s, m):
    for schedule in mp.SCHEDULES:
        t = mp_model.pipeline_time_s(schedule, s, m, 2.0, 0.0)
        assert t == pytest.approx((m + s - 1) * 2.0)
        assert mp_model.pipeline_bubble(m, 2.0, t) == pytest.approx((s - 1) / (m + s - 1))


def test_overlap_is_never_modelled_slower_than_blocking():
    for s, m, c, tau in itertools.product(range(1, 6), range(1, 9), (0.1, 1.0, 3.0), (0.0, 0.5, 2.0)):
        assert mp_model.pipeline_time_s("overlap", s, m, c, tau) <= mp_model.pipeline_time_s("blocking", s, m, c, tau)


def test_pipeline_model_rejects_what_it_does_not_model():
    with pytest.raises(ValueError, match="schedule"):
        mp_model.pipeline_time_s("1f1b", 2, 2, 1.0, 1.0)
    with pytest.raises(ValueError):
        mp_model.pipeline_time_s("blocking", 0, 2, 1.0, 1.0)


# --- the stage layer --------------------------------------------------------------------------------


def test_stage_layer_is_a_dense_matmul_equal_to_the_unsplit_roll():
    pipe = ModelParallelSettings(stage_features=16, microbatch_rows=4)
    x = mp_workload._microbatch(pipe, 0, "cpu")
    y = x
    for s in range(3):
        w = mp_workload._stage_weight(s, 16, "cpu")
        assert w.is_contiguous() and w.sum().item() == 16  # a permutation, stored dense
        out = torch.empty_like(y)
        mp_workload._stage_forward(y, w, out)
        y = out
    assert torch.equal(y, mp_workload._unsplit_forward(x, 3))
    assert not torch.equal(y, mp_workload._unsplit_forward(x, 2))  # a skipped stage shows


# --- the train steps' check rule ------------------------------------------------------------------


def test_default_train_steps_are_exact_at_power_of_two_worlds():
    layer = ModelParallelSettings()
    for n in (1, 2, 4):
        assert mp_check.train_check_rule(layer, n, "mp").exact
        assert mp_check.train_check_rule(layer, n, "dp").exact


@pytest.mark.parametrize(
    "layer,n,split,why",
    [
        (ModelParallelSettings(out_features=96, batch=12), 3, "mp", "not a power of two"),
        (ModelParallelSettings(out_features=96, batch=12), 3, "dp", "ranks, not a power of two"),
        (ModelParallelSettings(in_features=1 << 22, out_features=64, batch=8), 2, "mp", "exceed 2^24"),
    ],
)
def test_inexact_steps_get_a_tolerance_and_say_why(layer, n, split, why):
    rule = mp_check.train_check_rule(layer, n, split)
    assert not rule.exact and rule.ops == layer.in_features + layer.batch + (n if split == "dp" else 1) + 4
    assert why in rule.rule and "forward error bound" in rule.rule


def _float32_step(w0, x, target, drop_last_sample=False):
    w = w0.clone().requires_grad_(True)
    y = x @ w.t()
    if drop_last_sample:  # a wrong gradient: the last sample's contribution is lost
        y = torch.cat([y[:-1], y[-1:].detach()])
    torch.nn.functional.mse_loss(y, target).backward()
    with torch.no_grad():
        return w - mp_check.LR * w.grad


def _data(layer):
    return (
        mp_workload._ints((layer.out_features, layer.in_features), 3, "cpu"),
        mp_workload._ints((layer.batch, layer.in_features), 4, "cpu"),
        mp_workload._ints((layer.batch, layer.out_features), 5, "cpu"),
    )


def test_an_exact_step_is_bit_identical_to_the_float64_reference():
    layer = ModelParallelSettings(in_features=512, out_features=256, batch=16)  # N = 2^12
    assert mp_check.train_check_rule(layer, 1, "mp").exact
    w0, x, t = _data(layer)
    ref = mp_check.reference_step(w0, x, t)
    assert torch.equal(_float32_step(w0, x, t).double(), ref)
    # one lost sample is a wrong gradient even though it changes each weight by ~1e-3 of its update
    assert mp_check.count_outside(_float32_step(w0, x, t, drop_last_sample=True), ref, torch.zeros_like(ref)) > 0


def test_the_tolerance_bounds_rounding_and_still_catches_a_wrong_gradient():
    layer = ModelParallelSettings(in_features=40, out_features=24, batch=12)  # N = 288: the mean rounds
    rule = mp_check.train_check_rule(layer, 1, "mp")
    w0, x, t = _data(layer)
    ref = mp_check.reference_step(w0, x, t)
    tol = mp_check.train_tolerance(rule, w0, x, t, ref)
    got = _float32_step(w0, x, t)
    assert not torch.equal(got.double(), ref)  # the rounding is real here ...
    assert mp_check.count_outside(got, ref, tol) == 0  # ... and inside the bound
    assert mp_check.count_outside(_float32_step(w0, x, t, drop_last_sample=True), ref, tol) > 0
    assert tol.max().item() < 1e-4 * ref.abs().max().item()  # far tighter than the old rtol=1e-4


def test_count_outside_counts_nan_and_shape_mismatch():
    e = torch.zeros(4, dtype=torch.float64)
    assert mp_check.count_outside(torch.tensor([0.0, float("nan"), 0.0, 1e-3]), e, torch.full_like(e, 1e-2)) == 1
    assert mp_check.count_outside(torch.zeros(3), e, e) == 4


# --- knobs and cases ---------------------------------------------------------------------------------


def test_pipeline_knobs_reach_the_config_and_bad_ones_are_rejected():
    cfg = build_config(**settings_from_env({"MP_STAGE_FEATURES": "256", "MP_MICROBATCH_ROWS": "32"}))
    assert (cfg.model_parallel.stage_features, cfg.model_parallel.microbatch_rows) == (256, 32)
    for env in ({"MP_STAGE_FEATURES": "0"}, {"MP_MICROBATCH_ROWS": "-1"}, {"MP_STAGE_FEATURES": "32768"}):
        with pytest.raises(ConfigError, match="MP_STAGE_FEATURES"):
            build_config(**settings_from_env(env))


def test_cases_whose_time_includes_compute_say_so():
    """Their size / time is an effective rate, so the harness records no nccl-tests busbw for them."""
    by_op = {}
    for c in mp.model_parallel_cases(BenchConfig(), 4):
        by_op.setdefault(c.op, set()).add(c.bytes.time_includes)
    assert by_op["scatter"] == by_op["pipeline_transfer"] == {None}  # communication alone
    assert by_op["pipeline_compute"] == {None}  # no bytes: no bandwidth at all
    for op in ("pipeline_blocking", "pipeline_overlap"):
        assert by_op[op] == {"every stage's matmul of every micro-batch"}
    for op in ("mp_forward_all_gather", "mp_forward_gather", "mp_train_step", "dp_train_step"):
        assert by_op[op] == {mp.TIME_INCLUDES[op]} and mp.TIME_INCLUDES[op]


def test_cases_declare_both_schedules_and_name_every_modelled_number():
    cases = mp.model_parallel_cases(BenchConfig(), 4)
    labels = [c.label for c in cases]
    assert len(labels) == len(set(labels))
    pipe = [c for c in cases if c.op in ("pipeline_blocking", "pipeline_overlap")]
    assert {(c.fields["schedule"], c.identity["microbatches"]) for c in pipe} == set(
        itertools.product(mp.SCHEDULES, mp_workload.MICROBATCHES)
    )
    for c in pipe:
        assert c.fields["model"] == mp_model.PIPELINE_MODELS[c.fields["schedule"]]
        for k in ("model_time_us", "model_bubble", "ideal_bubble"):
            assert c.provenance[k].startswith("modelled:")
        assert c.provenance["stage_compute_us"].startswith("measured:")
        assert c.provenance["bubble"].startswith("derived:")
    train = {c.op: c for c in cases if c.op.endswith("train_step")}
    assert all(c.fields["check_exact"] and c.fields["check"].startswith("exact") for c in train.values())
    hop = next(c for c in cases if c.op == "pipeline_transfer")
    comp = next(c for c in cases if c.op == "pipeline_compute")
    # c and τ are sampled as long as the longest schedule's M + S - 1 slots (8 + 4 - 1 at 4 ranks), not one op
    assert mp_workload.stage_repeats(4) == max(mp_workload.MICROBATCHES) + 3 == 11
    assert hop.timing.divisor == 11 * 3 and comp.timing.divisor == 11  # 4 stages, 3 hops, 11 repeats per sample
    assert hop.fields["stage_repeats"] == comp.fields["stage_repeats"] == 11
    assert "stage_repeats times back to back" in pipe[0].provenance["stage_compute_us"]
    assert pipe[0].provenance["model_holds"].startswith("derived: |time_over_model - 1| <= ")


# --- tables -------------------------------------------------------------------------------------------


def _rec(**kw):
    base = {
        "experiment": "model_parallel",
        "backend": "gloo",
        "device": "cpu",
        "world_size": 3,
        "timing_mode": "blocking",
        "iterations": 5,
        "n_wrong": 0,
        "checked": True,
        "p95_us": 10.0,
        "table": "pipeline",
        "stages": 3,
        "stage_features": 512,
        "microbatch_rows": 128,
        "microbatch_bytes": 262144,
    }
    return {**base, **kw}


def test_pipeline_table_shows_both_schedules_measured_against_their_models():
    c, tau = 600.0, 400.0
    recs = [_rec(op="pipeline_compute", time_us=c), _rec(op="pipeline_transfer", time_us=tau)]
    for schedule in mp.SCHEDULES:
        for m in (1, 8):
            model = mp_model.pipeline_time_s(schedule, 3, m, c, tau)
            recs.append(
                _rec(
                    op=f"pipeline_{schedule}",
                    schedule=schedule,
                    microbatches=m,
                    model=mp_model.PIPELINE_MODELS[schedule],
                    time_us=1.1 * model,
                    model_time_us=model,
                    time_over_model=1.1,
                    stage_compute_us=c,
                    transfer_us=tau,
                    bubble=mp_model.pipeline_bubble(m, c, 1.1 * model),
                    model_bubble=mp_model.pipeline_bubble(m, c, model),
                    ideal_bubble=2 / (m + 2),
                )
            )
    text = tables.format_tables(recs)
    assert "c = 0.600 ms" in text and "tau = 0.400 ms" in text
    assert mp_model.PIPELINE_MODELS["blocking"] in text and mp_model.PIPELINE_MODELS["overlap"] in text
    rows = {
        tuple(line.split()[:2]): line.split()
        for line in text.splitlines()
        if line.split()[:1] in (["blocking"], ["overlap"])
    }
    # blocking M = 8: T = 3c + 2tau + 7(c + 2tau) = 2.6 + 9.8 = 12.4 ms modelled; bubble = 1 - 8c/T
    assert rows[("blocking", "8")][2:8] == [
        "13.640",
        "12.400",
        "1.10",
        f"{1 - 4.8 / 13.64:.3f}",
        f"{1 - 4.8 / 12.4:.3f}",
        "0.200",
    ]
    # overlap M = 8, compute-bound: T = 10c + 2tau = 6.8 ms
    assert rows[("overlap", "8")][3] == "6.800"
    assert "#wrong total: 0 [OK]" in text
    assert "does not hold" not in text  # records without model_holds (stored before it) are not flagged


def test_a_pipeline_model_that_does_not_hold_is_flagged():
    c, tau = 600.0, 400.0
    recs = [_rec(op="pipeline_compute", time_us=c), _rec(op="pipeline_transfer", time_us=tau)]
    for m, ratio in ((1, 1.1), (8, 3.0)):
        model = mp_model.pipeline_time_s("blocking", 3, m, c, tau)
        recs.append(
            _rec(
                op="pipeline_blocking",
                schedule="blocking",
                microbatches=m,
                model=mp_model.PIPELINE_MODELS["blocking"],
                time_us=ratio * model,
                model_time_us=model,
                time_over_model=ratio,
                model_holds=abs(ratio - 1) <= mp_derived.MODEL_HOLDS_WITHIN,
                stage_compute_us=c,
                transfer_us=tau,
            )
        )
    text = tables.format_tables(recs)
    rows = {line.split()[1]: line.split() for line in text.splitlines() if line.split()[:1] == ["blocking"]}
    assert rows["1"][4] == "1.10" and rows["8"][4] == "3.00!"
    assert "# ! model does not hold (model_holds: false, T too far from it): blocking M=8;" in text


def test_split_table_prints_the_check_rule():
    recs = [
        _rec(
            op="mp_train_step",
            table="model_parallel",
            in_features=8,
            out_features=8,
            global_batch=4,
            size_bytes=128,
            p50_us=5.0,
            algbw_gbps=0.1,
            busbw_gbps=0.1,
            samples_per_s=10.0,
            check="within the float32 forward error bound ...",
            check_exact=False,
            check_max_tolerance=2e-7,
        )
    ]
    text = tables.format_tables(recs)
    assert "# check mp_train_step: within the float32 forward error bound ... (largest tolerance 2e-07)" in text
    assert math.isfinite(len(text))
