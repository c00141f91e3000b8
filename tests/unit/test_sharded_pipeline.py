"""The sharded experiment's pipeline strategies, pure parts: stage split, what cannot run and why, the
bubble model, the p2p theory, the micro-batch knob, the check rule and the reference's micro-batch sums."""

import pytest
import torch
import torch.nn.functional as F

from experiments.sharded import built_in, check, pipeline, train, workload
from experiments.sharded.pipeline import PIPELINES
from experiments.sharded.settings import STRATEGIES, ShardedSettings
from suite.errors import ConfigError
from tests.user_models import built_in_reference, built_in_rule

PIPELINE = tuple(s for s in STRATEGIES if s in PIPELINES)


@pytest.mark.parametrize("depth, stages", [(2, 2), (3, 4), (7, 4), (1, 2), (6, 3)])
def test_stages_cover_every_layer_in_order_with_at_least_one_each(depth, stages):
    bounds = pipeline.stage_layers(depth, stages)
    assert bounds[0][0] == 0 and bounds[-1][1] == depth + 1  # the blocks and the head
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [b - a for a, b in bounds]
    assert min(sizes) >= 1 and sizes == sorted(sizes)  # the remainder goes to later stages (the head's)


def test_cannot_run_names_the_knob_to_change():
    assert "at least 2 ranks" in pipeline.cannot_run("pp_gpipe", 1, 2, 4)
    assert "SHARDED_DEPTH >= 3" in pipeline.cannot_run("pp_interleaved", 2, 2, 4)  # 4 stages, 3 layers
    assert "SHARDED_DEPTH >= 3" in pipeline.cannot_run("pp_gpipe", 4, 2, 4)
    assert pipeline.cannot_run("pp_interleaved", 2, 3, 4) is None
    assert "SHARDED_MICROBATCHES >= 4" in pipeline.cannot_run("pp_1f1b", 4, 3, 2)
    assert pipeline.cannot_run("pp_gpipe", 4, 3, 2) is None  # GPipe takes fewer micro-batches than stages
    assert "SHARDED_MICROBATCHES" in pipeline.cannot_run("pp_interleaved", 2, 3, 5)  # 2 rounds do not divide 5
    assert all(pipeline.cannot_run(s, 2, 2, 4) is None for s in ("ddp", "fsdp2", "tp", "pp_gpipe", "pp_1f1b"))
    assert workload.cannot_run("pp_gpipe", 2, 31, 8, 8) is None  # no width split: not a tensor-parallel rule
    assert "SHARDED_MICROBATCHES >= 2" in pipeline.cannot_run("pp_misrouted", 2, 2, 1)  # no other micro-batch
    assert pipeline.cannot_run("pp_misrouted", 2, 2, 2) is None


def test_bubble_fraction_follows_gpipe_and_the_interleaved_reduction():
    assert pipeline.bubble_fraction("pp_gpipe", 2, 4) == pytest.approx(1 / 5)
    assert pipeline.bubble_fraction("pp_1f1b", 4, 8) == pytest.approx(3 / 11)
    assert pipeline.bubble_fraction("pp_interleaved", 2, 4) == pytest.approx(1 / 9)  # (p-1)/(vm+p-1), v = 2
    assert pipeline.bubble_fraction("pp_gpipe", 4, 1) == pytest.approx(3 / 4)  # one micro-batch: p-1 of p idle


@pytest.mark.parametrize(
    "strategy, world", [("pp_gpipe", 2), ("pp_1f1b", 4), ("pp_interleaved", 2), ("pp_interleaved", 3)]
)
def test_theory_sends_each_activation_and_gradient_once_per_boundary(strategy, world):
    d, seq, batch, m = 16, 4, 8, 4
    rows = pipeline.theory(strategy, d, seq, batch, world, m)
    stages = world * pipeline.stages_per_rank(strategy)
    a = 4 * (batch // m) * seq * d
    assert pipeline.activation_bytes(d, seq, batch, m) == a
    assert pipeline.theory_bytes(strategy, d, seq, batch, world, m) == 2 * (stages - 1) * m * a
    for phase in ("forward", "backward"):
        sends = sum(r["count"] for r in rows if r["op"] == "send" and r["phase"] == phase)
        assert sends == (stages - 1) * m
    key = lambda r: (r["phase"], r["bytes"], r["count"])  # noqa: E731
    sends = sorted((r["rank"], r["peer"], key(r)) for r in rows if r["op"] == "send")
    recvs = sorted((r["peer"], r["rank"], key(r)) for r in rows if r["op"] == "recv")
    assert sends == recvs  # every send has its recv on the peer
    assert {r["group"] for r in rows} == {"pp"} and {r["dtype"] for r in rows} == {"float32"}


def test_theory_per_rank_at_4_ranks_and_interleaved_at_2():
    a = pipeline.activation_bytes(16, 4, 8, 4)
    sent = pipeline.sent_bytes(pipeline.theory("pp_gpipe", 16, 4, 8, 4, 4))
    assert sent == {0: 4 * a, 1: 8 * a, 2: 8 * a, 3: 4 * a}  # the middle stages send both ways
    rows = pipeline.theory("pp_interleaved", 16, 4, 8, 2, 4)
    fwd0 = next(r for r in rows if (r["rank"], r["op"], r["phase"]) == (0, "send", "forward"))
    bwd0 = next(r for r in rows if (r["rank"], r["op"], r["phase"]) == (0, "send", "backward"))
    assert (fwd0["peer"], fwd0["count"], bwd0["count"]) == (1, 8, 4)  # stages 0 and 2 forward, stage 2 back


def _p2p_fields(rows: list[dict], c10d: dict | None) -> dict:
    """pp_gpipe's inventory fields at 2 ranks on the built-in model of width 16, depth 2, seq 4, batch 8 and 4
    micro-batches, against its theory (built_in.BuiltIn) and DDP's on the same model."""
    m = built_in.BuiltIn(ShardedSettings(width=16, depth=2, seq=4, batch=8, microbatches=4), 2)
    return pipeline.p2p_fields(rows, 16, c10d, m.theory("pp_gpipe", 2), train.ddp_theory(m.n_params()), 2)


def test_inventory_fields_match_theory_and_see_a_wrong_phase():
    rows = pipeline.theory("pp_gpipe", 16, 4, 8, 2, 4)
    f = _p2p_fields(rows, {"pp": 8})
    a = 4 * 2 * 4 * 16  # one micro-batch of 2 rows x 4 x 16 float32
    assert f["inventory_matches_theory"] and f["inventory_bytes"] == f["theory_bytes"] == 2 * 4 * a
    assert f["inventory_ops"] == 8 and f["p2p_ops_dispatched"] == 16 and f["bus_bytes"] == 4 * a
    assert f["commdebug_ops"] is None and f["c10d_ops"] == {"pp": 8}
    wrong = [dict(r, phase="unknown") if r["op"] == "recv" else r for r in rows]
    assert not _p2p_fields(wrong, None)["inventory_matches_theory"]


def test_the_microbatch_knob_must_divide_the_batch_when_a_pipeline_runs():
    ShardedSettings().validate()
    assert set(PIPELINE) <= set(ShardedSettings().strategies)
    with pytest.raises(ConfigError, match="SHARDED_MICROBATCHES=3 does not divide SHARDED_BATCH=8"):
        ShardedSettings(microbatches=3).validate()
    with pytest.raises(ConfigError, match="SHARDED_MICROBATCHES=0"):
        ShardedSettings(microbatches=0).validate()
    ShardedSettings(microbatches=3, strategies=("ddp", "fsdp2")).validate()  # no pipeline: not used
    # your own model has its own batch (SHARDED_BATCH does not size it): user_model.not_dividing checks its rows
    ShardedSettings(microbatches=3, model="examples.sharded_model:build_pipeline").validate()
    with pytest.raises(ConfigError, match="SHARDED_MICROBATCHES=0"):
        ShardedSettings(microbatches=0, model="examples.sharded_model:build_pipeline").validate()
    ShardedSettings(microbatches=8).validate()


def test_check_rule_is_exact_for_a_power_of_two_of_micro_batches():
    assert built_in_rule("pp_gpipe", 2, 2, 32, microbatches=4).exact
    assert built_in_rule("pp_1f1b", 4, 2, 32, microbatches=1).exact
    rule = built_in_rule("pp_interleaved", 2, 3, 32, microbatches=3)
    assert not rule.exact and rule.terms == 3
    assert "micro-batch" in rule.describe(2, 1e-6)


def _microbatched_step(net, x, y, m, scale: bool):
    """What a schedule and the step's SGD do on one process: per micro-batch mean-squared error, backward
    (accumulating), then the sum divided by m (``scale_grads``)."""
    opt = torch.optim.SGD(net.parameters(), lr=workload.LR)
    opt.zero_grad()
    for xi, yi in zip(x.tensor_split(m), y.tensor_split(m)):
        F.mse_loss(net(xi), yi).backward()
    if scale:
        for p in net.parameters():
            p.grad.div_(m)
    opt.step()


@pytest.mark.parametrize("m", [2, 4])
def test_the_reference_split_in_micro_batches_is_what_a_scaled_schedule_trains(m):
    ref = built_in_reference(16, 2, 4, 8, m)
    net = workload.build_net(16, 2)
    for k in range(3):
        _microbatched_step(net, *ref.batches[k % workload.BATCHES], m, scale=True)
    want, _, _ = ref.at(3)
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), want))  # bit for bit
    bad = workload.build_net(16, 2)
    _microbatched_step(bad, *ref.batches[0], m, scale=False)  # pp_unscaled: m times the gradient
    mine = [p.detach() for p in bad.parameters()]
    wrong, _, _ = check.compare(mine, built_in_reference(16, 2, 4, 8, m).at(1)[0], [0.0] * len(mine))
    assert wrong > 1000


def test_table_lists_the_schedule_and_each_ranks_p2p_with_its_peer():
    from experiments.sharded.table import format_tables

    rows = pipeline.theory("pp_gpipe", 16, 4, 8, 2, 4)
    rec = {
        "experiment": "sharded", "op": "train_step", "label": "pp_gpipe", "strategy": "pp_gpipe", "backend": "gloo",
        "device": "cpu", "world_size": 2, "timing_mode": "blocking", "iterations": 3, "p50_us": 2500.0,
        "samples_us": [2400.0, 2500.0, 2600.0], "n_params": 100, "width": 16, "depth": 2, "seq": 4, "batch": 8,
        "n_wrong": 0, "checked": True, "check_rule": "exact", "microbatches": 4,
    } | pipeline.declared_fields("pp_gpipe", ShardedSettings(width=16, depth=2, seq=4, batch=8), 2) | (
        _p2p_fields(rows, None)
    )  # fmt: skip
    out = format_tables([rec])
    assert "pp_gpipe: ScheduleGPipe, 2 stages (1 per rank) x 4 micro-batches, 512 B per activation, bubble 0.20" in out
    assert "pp_gpipe: rank 0 -> 1: 4 x send float32 512 B on pp in forward" in out
    assert "pp_gpipe: rank 0 <- 1: 4 x recv float32 512 B on pp in backward" in out
    assert "4.0=" in out  # S/step 4 KiB, as theory
    assert "depth" not in out.split("bubble 0.20")[1].split("\n")[0]  # SHARDED_DEPTH's own model: nothing to add
    deeper = rec | {"depth": 3, "n_params": 150, "depth_raised_from": 2, "stages": 4}
    assert "bubble 0.20 (model); depth 3, 150 params (SHARDED_DEPTH=2 gives too few layers)" in format_tables([deeper])


def test_why_the_pipeline_inventory_is_not_commdebugmode():
    """The torch 2.13 facts behind P2PInventory (if one stops holding, CommDebugMode may do after all): it
    counts no send/recv, and a module run twice under it (every micro-batch runs each stage again) fails."""
    from torch.distributed.tensor.debug import CommDebugMode

    from experiments.sharded import internals

    names = {str(op) for op in internals.c10d_collectives()}
    assert "c10d.allreduce_" in names and not {"c10d.send", "c10d.recv_"} & names
    layer = torch.nn.Linear(4, 4)
    with CommDebugMode():
        layer(torch.zeros(2, 4))  # the first run is fine
        with pytest.raises(IndexError):
            layer(torch.zeros(2, 4))


def test_cpu_notes_are_recorded_on_cpu_only():
    """What Gloo on CPU does differently (no overlap, the all_to_all fallback, Gloo send/recv) is stated in the
    records of a CPU run and in no GPU run's, where it would be false (issue 26: 'what differs on CPU')."""
    import types

    import torch

    from experiments.sharded.cases import sharded_cases
    from suite.case import Session
    from suite.common.config import build_config

    cfg = build_config(sharded={"strategies": "ddp,fsdp2,pp_gpipe"})
    cases = sharded_cases(cfg, 2)
    assert {c.label for c in cases} == {"ddp", "replay-ddp", "fsdp2", "replay-fsdp2", "pp_gpipe"}
    for device, noted in (("cpu", True), ("cuda", False)):
        ctx = types.SimpleNamespace(device=torch.device(device))
        for c in cases:
            bound = c.resolve(c, ctx, cfg, Session())
            assert ("cpu_notes" in bound.fields) is noted, (device, c.label)
            assert bound.build is c.build  # the build gets the session itself (Case.build(ctx, session))


def test_a_stage_is_checked_under_the_whole_models_bound():
    # 3 micro-batches (a tolerance): every tensor's bound carries S(S-1) x the largest tensor's step term, the
    # whole model's (its layers are coupled across stages); a stage whose own tensors are all small must not
    # get a tighter bound from its own largest. Rank 1 of GPipe at 2 ranks holds the second half of the layers.
    rule = built_in_rule("pp_gpipe", 2, 2, 16, microbatches=3)
    ref = built_in_reference(16, 2, 4, 6, 3)
    net = workload.build_net(16, 2)
    index = {id(q): i for i, q in enumerate(net.parameters())}
    second = [*net.blocks, net.head][slice(*pipeline.stage_layers(2, 2)[1])]
    owned = [index[id(q)] for layer in second for q in layer.parameters()]  # as make_trainer's Trainer.owned
    assert owned == list(range(6, 14))  # the second block (LayerNorm, up, down) and the head
    _, whole, _ = check.expected(rule, ref, 5)
    mine, tols, use = check.expected(rule, ref, 5, owned)
    assert tols == [whole[i] for i in owned] and len(mine) == len(use) == len(owned)
    _, g, p = ref.at(5)
    alone = rule.tols(5, [g[i] for i in owned], [p[i] for i in owned])  # the stage's own largest: too tight
    assert any(a < t for a, t in zip(alone, tols))


@pytest.mark.parametrize("world", [2, 4])
def test_the_default_run_declares_every_pipeline_runnable_on_the_built_in_model(world):
    """`make bench-cpu` (4 ranks) and NPROC=2 with no SHARDED_* set: each pipeline strategy takes the blocks its
    stages need (each stage at least one layer: the blocks and the head), so none is skipped for depth; every
    other strategy keeps the model SHARDED_DEPTH sizes, and each case its identity's fields (stored runs compare)."""
    from experiments.sharded.cases import sharded_cases
    from suite.common.config import build_config

    cfg = build_config()
    cases = {c.label: c for c in sharded_cases(cfg, world)}
    assert set(PIPELINE) <= set(cases)
    for s in PIPELINE:
        c = cases[s]
        stages = world * pipeline.stages_per_rank(s)
        assert set(c.identity) == {"strategy", "width", "depth", "seq", "batch", "microbatches"}, s
        assert c.identity["depth"] == max(cfg.sharded.depth, stages - 1), s  # the fewest that give each stage one
        assert pipeline.cannot_run(s, world, c.identity["depth"], cfg.sharded.microbatches) is None, s
        assert c.bytes.size_bytes == 2 * (stages - 1) * 4 * pipeline.activation_bytes(32, 8, 8, 4), s
        assert c.fields["stages"] == stages and len(c.fields["stage_layers"]) == stages, s
        raised = c.identity["depth"] > cfg.sharded.depth
        assert c.fields.get("depth_raised_from") == (cfg.sharded.depth if raised else None), s
        assert "depth_raised_from" in c.provenance, s
    for s in set(cases) - set(PIPELINE):
        assert cases[s].identity["depth"] == cfg.sharded.depth == 2, s  # SHARDED_DEPTH's model, unchanged
