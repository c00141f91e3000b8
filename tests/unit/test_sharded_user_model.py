"""SHARDED_MODEL (your own model in the sharded experiment): each bad value is rejected by the launcher the user
types, before any rank starts, with one line and exit 2; the pure rules (which strategies a model takes, what
FSDP2 shards, the check's tolerance terms) on the worked example (examples/sharded_model.py)."""

import dataclasses
import itertools
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from examples import sharded_model
from experiments.sharded import built_in, check, shapes, user_model, user_pieces, pipeline_train, train, workload
from experiments.sharded.pipeline import PIPELINES
from experiments.sharded.settings import PLANTED, STRATEGIES
from suite.launch import cli as launch
from tests import user_models
from tests.conftest import ROOT

PIPELINE = tuple(s for s in STRATEGIES if s in PIPELINES)

HERE = "tests.unit.test_sharded_user_model"


def odd_rows():
    """The example with a batch of 5 rows: no data-parallel split over 2 ranks."""
    return user_model.UserModel(
        module=nn.Linear(4, 4), batch=lambda s: (sharded_model.batch(s)[0][:5],) * 2, loss=F.mse_loss
    )


def no_plan():
    return user_model.UserModel(module=sharded_model.Regressor(), batch=sharded_model.batch, loss=F.mse_loss)


def uneven_plan():
    """A column-parallel Linear of 6 outputs: it splits over 2 ranks, not over 4."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    module = nn.Sequential(nn.Linear(sharded_model.WIDTH, 6), nn.ReLU(), nn.Linear(6, sharded_model.WIDTH))
    plan = {"0": ColwiseParallel(), "2": RowwiseParallel()}
    return user_model.UserModel(module=module, batch=sharded_model.batch, loss=F.mse_loss, tp_plan=plan)


def negative_seq_dim():
    """seq_dim counted from the end, beyond the inputs' 3 dimensions."""
    return dataclasses.replace(sharded_model.build_sequence(), seq_dim=-4)


def norm_on_features():
    """The sequence example whose norms are SequenceParallel along dim 2, the features, not seq_dim=1."""
    from torch.distributed.tensor.parallel import SequenceParallel

    um = sharded_model.build_sequence()
    return dataclasses.replace(um, sp_plan={**um.sp_plan, "layers.*.norm": SequenceParallel(sequence_dim=2)})


def gather_on_features():
    """A column-parallel Linear told its input is sharded along dim -1 (the features) under sp."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel

    um = sharded_model.build_sequence()
    return dataclasses.replace(um, sp_plan={**um.sp_plan, "layers.*.inp": ColwiseParallel(input_layouts=Shard(-1))})


def flat_sequence():
    """An sp_plan on a model whose inputs are (rows, width): no dimension 2 to split."""
    return dataclasses.replace(sharded_model.build(), sp_plan=sharded_model.SP_PLAN, seq_dim=2)


SHARED = sharded_model.Regressor()


def shared_module():
    """The same module object on every call: the ranks' sharding would reach the reference's model."""
    return user_model.UserModel(module=SHARED, batch=sharded_model.batch, loss=F.mse_loss)


CALLS = itertools.count(1)


def unseeded():
    import torch

    torch.manual_seed(next(CALLS))  # a new seed on each call
    return no_plan()


def random_batch():
    import torch

    return user_model.UserModel(
        module=sharded_model.Regressor(), batch=lambda s: (torch.randn(8, 16), torch.randn(8, 16)), loss=F.mse_loss
    )


class Locked(nn.Linear):
    """A Linear holding a lock: copy.deepcopy cannot copy it."""

    def __init__(self) -> None:
        import threading

        super().__init__(sharded_model.WIDTH, sharded_model.WIDTH)
        self.lock = threading.Lock()


def uncopyable():
    return user_model.UserModel(module=Locked(), batch=sharded_model.batch, loss=F.mse_loss)


def broken():
    raise RuntimeError("no weights here")


def _pipeline_with(pieces):
    return dataclasses.replace(sharded_model.build_pipeline(), pp_layers=pieces)


def pieces_out_of_order():
    """The residual layers listed last to first: every parameter held once, the forward not the pieces'."""
    return _pipeline_with(lambda m: [m.embed, *reversed(m.layers), m.head])


def head_left_out():
    return _pipeline_with(lambda m: [m.embed, *m.layers])


class Skip(sharded_model.Stacked):
    """The embedding added back after the head: a connection across pieces, which no stage split can carry."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + self.embed(x)


def skip_connection():
    return dataclasses.replace(sharded_model.build_pipeline(), module=Skip())


def six_rows():
    """The pipeline example on 6-row batches: micro-batches of 3 split them, SHARDED_BATCH (8) does not matter."""
    um = sharded_model.build_pipeline()
    return dataclasses.replace(um, batch=lambda step: tuple(t[:6] for t in um.batch(step)))


BAD = {
    "not module:function": ({"SHARDED_MODEL": "sharded_model"}, 2, "is not module:function"),
    "no module": ({"SHARDED_MODEL": "examples.no_such_model:build"}, 2, "cannot import examples.no_such_model"),
    "no function": ({"SHARDED_MODEL": "examples.sharded_model:nothing"}, 2, "has no function 'nothing'"),
    "needs arguments": ({"SHARDED_MODEL": "examples.sharded_model:batch"}, 2, "batch() failed (TypeError"),
    "not a UserModel": ({"SHARDED_MODEL": "collections:OrderedDict"}, 2, "must return experiments.sharded"),
    "factory fails": ({"SHARDED_MODEL": f"{HERE}:broken"}, 2, "broken() failed (RuntimeError: no weights here)"),
    "shared module": ({"SHARDED_MODEL": f"{HERE}:shared_module"}, 2, "returned the same module object twice"),
    "unseeded": ({"SHARDED_MODEL": f"{HERE}:unseeded"}, 2, "built different weights"),
    "uncopyable": ({"SHARDED_MODEL": f"{HERE}:uncopyable"}, 2, "copy.deepcopy cannot copy its module (TypeError"),
    "random batch": ({"SHARDED_MODEL": f"{HERE}:random_batch"}, 2, "the same tensors on every call"),
    "rows": ({"SHARDED_MODEL": f"{HERE}:odd_rows"}, 2, "batch has 5 rows, which do not split into 2"),
    "parameter": ({"SHARDED_MODEL": f"{HERE}:uneven_plan"}, 4, "tp_plan shards 0 (colwise, out_features=6)"),
    "mesh": (
        {"SHARDED_MODEL": "examples.sharded_model:build", "SHARDED_STRATEGIES": "2d"},
        2,
        "2d needs an even world of at least 4 ranks",
    ),
    "strategy": (
        {"SHARDED_MODEL": "examples.sharded_model:build", "SHARDED_STRATEGIES": "fsdp2,tp_wrong_shard"},
        2,
        "tp_wrong_shard runs on the built-in model only",
    ),
    "no pp_layers": (
        {"SHARDED_MODEL": "examples.sharded_model:build", "SHARDED_STRATEGIES": "fsdp2,pp_1f1b"},
        2,
        "pp_1f1b needs pp_layers (the forward's pieces), and the model names none",
    ),
    "pieces out of order": (
        {"SHARDED_MODEL": f"{HERE}:pieces_out_of_order"},
        2,
        "pp_layers' pieces applied in order to batch(0)'s inputs do not give the module's output (up to",
    ),
    "piece left out": ({"SHARDED_MODEL": f"{HERE}:head_left_out"}, 2, "pp_layers' pieces leave out head.weight"),
    "skip connection": (
        {"SHARDED_MODEL": f"{HERE}:skip_connection", "SHARDED_STRATEGIES": "pp_gpipe"},
        2,
        "do not give the module's output",
    ),
    "too few pieces": (
        {"SHARDED_MODEL": "examples.sharded_model:build_pipeline", "SHARDED_STRATEGIES": "pp_interleaved"},
        4,
        "pp_interleaved needs 8 stages at 4 ranks, and the model's pp_layers has 6 pieces",
    ),
    "micro-batches": (
        {
            "SHARDED_MODEL": "examples.sharded_model:build_pipeline",
            "SHARDED_STRATEGIES": "pp_gpipe",
            "SHARDED_MICROBATCHES": "3",
        },
        2,
        "pp_gpipe: the model's batch has 8 rows, which do not split into SHARDED_MICROBATCHES=3 equal micro-batches",
    ),
    "no sp plan": (
        {"SHARDED_MODEL": "examples.sharded_model:build", "SHARDED_STRATEGIES": "fsdp2,sp"},
        2,
        "sp needs an sp_plan, and the model names none",
    ),
    "sequence": (
        {"SHARDED_MODEL": "examples.sharded_model:build_sequence", "SHARDED_STRATEGIES": "sp"},
        3,
        "sp: the model's inputs have 8 positions along seq_dim=1, which do not split over 3 ranks",
    ),
    "seq_dim": (
        {"SHARDED_MODEL": f"{HERE}:negative_seq_dim", "SHARDED_STRATEGIES": "sp"},
        2,
        "sp: seq_dim=-4 must be an int >= 1 (dimension 0 is the batch's rows)",
    ),
    "sp norm dim": (
        {"SHARDED_MODEL": f"{HERE}:norm_on_features", "SHARDED_STRATEGIES": "sp"},
        2,
        "sp: sp_plan's layers.*.norm (SequenceParallel) shards the sequence along dim 2 (sequence_sharding), "
        "not seq_dim=1",
    ),
    "sp gather dim": (
        {"SHARDED_MODEL": f"{HERE}:gather_on_features", "SHARDED_STRATEGIES": "sp"},
        2,
        "sp: sp_plan's layers.*.inp (ColwiseParallel) shards the sequence along dim -1 (input_layouts), not seq_dim=1",
    ),
    "no sequence": (
        {"SHARDED_MODEL": f"{HERE}:flat_sequence", "SHARDED_STRATEGIES": "sp"},
        2,
        "sp: the model's inputs have 2 dimensions, no seq_dim=2 to split over 2 ranks",
    ),
    "no plan": ({"SHARDED_MODEL": f"{HERE}:no_plan", "SHARDED_STRATEGIES": "tp"}, 2, "tp needs a tp_plan"),
}


def _check(monkeypatch, tmp_path, env: dict, nproc: int) -> tuple[int, str]:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = launch.main(["--check", "--nproc", str(nproc), "--experiments", "sharded", "--results-root", str(tmp_path)])
    return code


@pytest.mark.parametrize("what", sorted(BAD))
def test_a_bad_model_is_rejected_before_any_rank_starts(what, monkeypatch, capsys, tmp_path):
    env, nproc, words = BAD[what]
    code = _check(monkeypatch, tmp_path / "r", env, nproc)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: SHARDED_MODEL") and err.count("\n") == 1, err
    assert words in err, err
    assert not (tmp_path / "r").exists()


def test_the_worked_example_passes_and_unsupported_defaults_are_left_to_skip(monkeypatch, capsys, tmp_path):
    """With the default strategy list, sp, the pipelines and 2d at 2 ranks are skipped on the ranks (each with
    its reason), not an error; the same model at 3 ranks cannot split its 8 rows: an error."""
    assert _check(monkeypatch, tmp_path, {"SHARDED_MODEL": "examples.sharded_model:build"}, 2) == 0
    capsys.readouterr()
    assert _check(monkeypatch, tmp_path, {}, 3) == 2
    assert "do not split into 3 data-parallel shards" in capsys.readouterr().err


def test_a_pipeline_model_passes_and_its_own_rows_decide_the_micro_batches(monkeypatch, capsys, tmp_path):
    """The pipeline example passes at 2 and 4 ranks (pp_interleaved's 8 stages at 4 left to skip: 6 pieces);
    SHARDED_MICROBATCHES=3 splits a model's 6 rows whatever SHARDED_BATCH is."""
    env = {"SHARDED_MODEL": "examples.sharded_model:build_pipeline"}
    assert _check(monkeypatch, tmp_path, env, 2) == 0 and _check(monkeypatch, tmp_path, env, 4) == 0
    six = {"SHARDED_MODEL": f"{HERE}:six_rows", "SHARDED_STRATEGIES": "pp_gpipe", "SHARDED_MICROBATCHES": "3"}
    assert _check(monkeypatch, tmp_path, six, 2) == 0, capsys.readouterr().err


def test_a_bad_model_exits_2_from_a_real_launcher(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "suite.launch", "--nproc", "2", "--experiments", "sharded"]
        + ["--results-root", str(tmp_path / "r")],
        cwd=ROOT,
        env={**os.environ, "SHARDED_MODEL": "examples.sharded_model:build", "SHARDED_STRATEGIES": "pp_gpipe"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "error: SHARDED_MODEL=examples.sharded_model:build with SHARDED_STRATEGIES=pp_gpipe: pp_gpipe needs "
        "pp_layers (the forward's pieces), and the model names none\n"
    )
    assert not (tmp_path / "r").exists()


def test_which_strategies_a_model_takes():
    with_plan, without = sharded_model.build(), no_plan()
    takes = {s for s in STRATEGIES if user_model.supported(with_plan, s) is None}
    assert takes == {"ddp", "fsdp2", "fsdp2_keep", "fsdp2_bf16", "tp", "2d"}
    sequence = {s for s in STRATEGIES if user_model.supported(sharded_model.build_sequence(), s) is None}
    assert sequence == takes | {"sp"}
    deep = {s for s in STRATEGIES + PLANTED if user_model.supported(sharded_model.build_pipeline(), s) is None}
    assert deep == takes | set(PIPELINE) | {"fsdp2_scaled", "pp_unscaled", "pp_misrouted"}
    assert {s for s in STRATEGIES if user_model.supported(without, s) is None} == {
        "ddp",
        "fsdp2",
        "fsdp2_keep",
        "fsdp2_bf16",
    }
    assert user_model.cannot_run(with_plan, "2d", 4) is None and "even world" in user_model.cannot_run(
        with_plan, "2d", 2
    )
    assert shapes.mesh_shape("2d", 4) == ((2, 2), ("dp", "tp")) and shapes.mesh_shape("tp", 2) == ((2,), ("tp",))


def test_fsdp2_shards_each_layer_or_what_the_model_names():
    um = sharded_model.build()
    assert train.fsdp_units(um) == list(um.module.layers)  # the ModuleList's children, one unit each
    named = user_model.UserModel(module=um.module, batch=um.batch, loss=um.loss, fsdp_units=("layers.1",))
    assert train.fsdp_units(named) == [um.module.layers[1]]


def test_the_tolerance_counts_the_row_parallel_dot_product():
    um = sharded_model.build()
    assert user_model.contraction(um, "tp") == sharded_model.HIDDEN  # `out` is row-parallel: in_features
    rule = check.check_rule("tp", 2, contraction=sharded_model.HIDDEN)
    assert rule.terms == 2 + sharded_model.HIDDEN // 2 and not rule.exact
    assert check.check_rule("2d", 4, contraction=64).terms == 4 + 64 // 2
    assert check.check_rule("fsdp2", 2).exact and check.check_rule("ddp", 4).terms == 4
    # sequence parallel: the sp_plan's row-parallel Linear, over every rank
    sp = train.check_rule("sp", 4, sharded_model.build_sequence())
    assert sp.terms == 4 + sharded_model.HIDDEN // 4 and not sp.exact


def test_bfloat16_checks_a_user_model_as_the_built_in_one():
    # FSDP2's mixed-precision policy on your model: the reference runs a bfloat16 copy of the factory's module
    # (floating inputs cast, as the policy casts them), averages float32 gradients and steps float32
    # parameters; exact at 2 ranks, and beyond, R counts every layer that holds parameters (each rounds the
    # activation in bfloat16: the built-in model's 2 x depth + 1 Linears)
    um = sharded_model.build()
    rule = train.check_rule("fsdp2_bf16", 4, um)
    assert train.layers(um) == 2 * sharded_model.LAYERS and rule.terms == 4 + 2 * sharded_model.LAYERS
    assert rule.u == 2.0**-8 and train.check_rule("fsdp2_bf16", 2, um).exact
    ref = train.reference(um, 2, "cpu", bf16=True)
    assert {p.dtype for p in ref.low.parameters()} == {torch.bfloat16} and ref.low is not um.module
    params, g_max, _ = ref.at(2)
    fp32 = train.reference(um, 2, "cpu").at(2)[0]
    assert all(p.dtype == torch.float32 for p in params)  # the float32 parameters are the ones stepped
    moved = [(a - b).abs().max().item() for a, b in zip(params, fp32)]
    assert 0 < max(moved) < 0.1 and all(g > 0 for g in g_max)  # bfloat16 rounding: near float32's, not equal


@pytest.mark.parametrize("factory", [sharded_model.build, user_models.normed], ids=["example", "layernorm"])
def test_bfloat16_at_4_ranks_catches_a_doubled_gradient_in_every_tensor_it_compares(factory):
    # your model under FSDP2's bfloat16 policy at 4 ranks (tolerance, R = world + layers with parameters, a
    # LayerNorm among them): against the reference, a strategy whose gradients are doubled (SGD at twice the
    # rate: the same update) fails in every tensor after the check step, where every tensor is compared; later
    # a tensor whose bound has outgrown its update is left out, never passed by construction
    um = factory()
    rule = train.check_rule("fsdp2_bf16", 4, um)
    assert not rule.exact and rule.terms == 4 + train.layers(um)
    ref = train.reference(um, 4, "cpu", bf16=True)
    doubled = train.reference(um, 4, "cpu", bf16=True)
    doubled.opt.param_groups[0]["lr"] = 2 * workload.LR
    for steps in (1, 3):
        good, g, p = ref.at(steps)
        tols = rule.tols(steps, g, p)
        use = rule.comparable(ref.moved(steps), tols)
        caught = [check.compare([b], [a], [t])[0] > 0 for a, b, t in zip(good, doubled.at(steps)[0], tols)]
        assert all(c for c, u in zip(caught, use) if u), (steps, caught, use)
        if steps == 1:
            assert all(use), use


def test_an_sp_output_that_is_not_the_ranks_slice_is_named():
    """The gather before the loss takes a plain output as this rank's slice of the sequence: a whole output (a
    row-parallel Linear left at its default Replicate) or a tuple fail with a line naming the plan, not a shape
    error inside the loss."""
    local = torch.zeros(8, 4, 16)  # a rank's slice: 4 of 8 positions
    assert train.sp_output_problem(torch.zeros(8, 4, 16), local, 1) is None
    whole = train.sp_output_problem(torch.zeros(8, 8, 16), local, 1)
    assert "output has shape (8, 8, 16), not this rank's slice" in whole and "output_layouts=Shard(1)" in whole
    assert "returned tuple, not one tensor" in train.sp_output_problem((local,), local, 1)
    assert "not this rank's slice" in train.sp_output_problem(torch.zeros(8), local, 1)


@pytest.mark.parametrize(
    ("pieces", "words"),
    [
        (lambda m: [m.embed, *m.layers, m.head, m.head], "pp_layers' pieces hold head.weight 2 times"),
        (lambda m: [m.embed, m.layers, m.head], "piece 1 (ModuleList) failed on the previous one's output"),
        (lambda m: [sharded_model.Stacked()], "must return a list of submodules of the module it is given"),
        (lambda m: 3, "pp_layers(module) failed (TypeError"),
        (lambda m: [nn.Sequential(m.embed, *m.layers, m.head)], "must return a list of submodules"),
    ],
    ids=["twice", "not a forward", "another module", "not a list", "a new container"],
)
def test_pp_layers_that_are_not_the_forward_in_pieces_are_named(pieces, words):
    assert user_pieces.pp_problem(sharded_model.build_pipeline()) is None
    assert words in user_pieces.pp_problem(_pipeline_with(pieces))


class Tupled(nn.Linear):
    def forward(self, x: torch.Tensor) -> tuple:
        return (super().forward(x),)


def test_a_piece_returning_a_tuple_is_named():
    module = nn.Sequential(Tupled(sharded_model.WIDTH, sharded_model.WIDTH))
    um = user_model.UserModel(module=module, batch=sharded_model.batch, loss=F.mse_loss, pp_layers=list)
    assert "piece 0 (Tupled) returned tuple, not one tensor" in user_pieces.pp_problem(um)


def test_a_pipelines_theory_follows_each_boundarys_activation():
    """Pieces of different widths: each stage boundary carries its own activation (one micro-batch of the batch's
    rows through the pieces), forward once and its gradient back once per micro-batch; the check rule is the
    built-in pipelines' (R = micro-batches, exact when that is a power of two)."""
    module = nn.Sequential(nn.Linear(16, 32), nn.Linear(32, 8), nn.Linear(8, 16), nn.Linear(16, 16))
    um = user_model.UserModel(module=module, batch=sharded_model.batch, loss=F.mse_loss, pp_layers=list)
    rows = sharded_model.ROWS // 4  # 4 micro-batches
    assert pipeline_train.boundaries(um, "pp_gpipe", 2, 4) == [(4 * rows * 8, "float32")]  # stages [0, 2), [2, 4)
    assert pipeline_train.boundaries(um, "pp_interleaved", 2, 4) == [(4 * rows * n, "float32") for n in (32, 8, 16)]
    assert pipeline_train.boundaries(um, "pp_gpipe", 8, 4) == []  # 8 stages, 4 pieces: skipped, no theory
    theory = pipeline_train.theory(um, "pp_interleaved", 2, 4)
    sent = {(r["rank"], r["peer"], r["phase"], r["bytes"]): r["count"] for r in theory if r["op"] == "send"}
    assert sent == {
        (0, 1, "forward", 4 * rows * 32): 4,  # stage 0 (rank 0) -> stage 1 (rank 1)
        (1, 0, "forward", 4 * rows * 8): 4,  # stage 1 (rank 1) -> stage 2 (rank 0)
        (0, 1, "forward", 4 * rows * 16): 4,
        (1, 0, "backward", 4 * rows * 32): 4,
        (0, 1, "backward", 4 * rows * 8): 4,
        (1, 0, "backward", 4 * rows * 16): 4,
    }
    sent = pipeline_train.boundaries(um, "pp_interleaved", 2, 4)
    step = pipeline_train.step_bytes(sent, 2, 4, "a step")
    assert step.size_bytes == 2 * 4 * 4 * rows * (32 + 8 + 16) and step.count == step.size_bytes // 4
    fields = pipeline_train.declared_fields("pp_interleaved", um, 2, 4, sent)
    assert fields["stage_layers"] == [[0, 1], [1, 2], [2, 3], [3, 4]] and fields["boundary_bytes"] == [
        4 * rows * n for n in (32, 8, 16)
    ]
    assert fields["activation_bytes"] == 4 * rows * 32 and fields["schedule"] == "ScheduleInterleaved1F1B"
    rule = train.check_rule("pp_gpipe", 2, um, 4)
    assert rule.exact and rule.terms == 4 and not train.check_rule("pp_gpipe", 2, um, 3).exact


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("factory", ["build", "build_sequence", "build_pipeline"])
def test_the_default_strategies_declare_on_every_example(factory, world):
    """The default SHARDED_STRATEGIES declared on each rank for each worked example (what `make bench-cpu
    SHARDED_MODEL=...` does first): a strategy the model cannot take is declared and left to skip with its reason,
    never a crash while declaring (a model without pp_layers once crashed on the pipelines' fields)."""
    from experiments.sharded.cases import sharded_cases
    from suite.common.config import build_config

    cfg = build_config(sharded={"model": f"examples.sharded_model:{factory}"})
    um = getattr(sharded_model, factory)()
    cases = {c.label: c for c in sharded_cases(cfg, world)}
    assert set(STRATEGIES) <= set(cases)
    for s in STRATEGIES:
        assert cases[s].identity["model"] == f"examples.sharded_model:{factory}"
        why = user_model.cannot_run(um, s, world, cfg.sharded.microbatches)
        if s in PIPELINE and why:  # skipped on the ranks: no theory, no stages
            assert cases[s].bytes.size_bytes == 0 and cases[s].fields["boundary_bytes"] == [], s


class Detached(sharded_model.Stacked):
    """The embedding's output detached in the forward: the same output as the pieces, not the same gradient."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).detach()
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def _zero_residuals() -> sharded_model.Stacked:
    """Stacked with every residual layer's output Linear zeroed (ReZero-style: each layer the identity at first)."""
    m = sharded_model.Stacked()
    with torch.no_grad():
        for layer in m.layers:
            layer.out.weight.zero_()
            layer.out.bias.zero_()
    return m


class Drop(sharded_model.Stacked):
    """A dropout between the layers and the head, at the root: the pieces must list it to draw its mask."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.drop(x))


@pytest.mark.parametrize(
    ("module", "pieces", "words"),
    [
        (Detached, sharded_model.pieces, "pieces give embed.weight another gradient"),
        # the identity at first: the same output in any order, but for the seeded noise pp_problem adds
        (_zero_residuals, lambda m: [m.embed, *reversed(m.layers), m.head], "do not give the module's output"),
        (Drop, sharded_model.pieces, "do not give the module's output"),
        (Drop, lambda m: [m.embed, *m.layers, m.drop, m.head], None),
    ],
    ids=["detach", "zero residuals reversed", "dropout left out", "dropout listed"],
)
def test_pieces_must_give_the_forwards_gradients_too(module, pieces, words):
    """A detach at the root gives the same output as the pieces, not the same gradients; layers that are the
    identity at first give the same output in any order until noise moves them; a root dropout must be a piece of
    its own (both runs draw under the same seed)."""
    um = dataclasses.replace(sharded_model.build_pipeline(), module=module(), pp_layers=pieces)
    why = user_pieces.pp_problem(um)
    assert (why is None) if words is None else (words in why), why


def test_a_stage_split_that_trains_nothing_on_a_rank_is_named():
    """Parameter-free pieces first: at 2 ranks stage 0 (pieces 0-1) has no parameter, and nothing it sends needs a
    gradient; at 4 ranks the interleaved split leaves rank 0 two parameter-free stages."""
    from experiments.sharded.settings import ShardedSettings

    module = nn.Sequential(nn.Identity(), nn.ReLU(), nn.Linear(16, 16), nn.Linear(16, 16))
    um = user_model.UserModel(module=module, batch=sharded_model.batch, loss=F.mse_loss, pp_layers=list)
    assert user_pieces.pp_problem(um) is None
    assert "rank 0's stages (pieces [0, 1]) hold no parameter" in user_model.cannot_run(um, "pp_gpipe", 2, 4)
    with pytest.raises(user_model.ConfigError, match="rank 0's stages"):  # named in SHARDED_STRATEGIES: an error
        user_model.check_world(ShardedSettings(model=f"{HERE}:param_free_first", strategies=("pp_gpipe",)), 2)
    # with parameters on every rank but a detached boundary, no gradient would go back across it
    frozen = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 16))
    frozen[0].weight.requires_grad_(False)
    frozen[0].bias.requires_grad_(False)
    um = user_model.UserModel(module=frozen, batch=sharded_model.batch, loss=F.mse_loss, pp_layers=list)
    assert "piece 0's output, sent from stage 0 to 1, does not require grad" in user_model.cannot_run(
        um, "pp_gpipe", 2, 4
    )


def param_free_first():
    module = nn.Sequential(nn.Identity(), nn.ReLU(), nn.Linear(16, 16), nn.Linear(16, 16))
    return user_model.UserModel(module=module, batch=sharded_model.batch, loss=F.mse_loss, pp_layers=list)


def test_every_batch_must_have_the_first_ones_shapes():
    um = sharded_model.build_pipeline()
    short = dataclasses.replace(um, batch=lambda k: tuple(t[: 8 - 4 * (k == 2)] for t in um.batch(k)))
    assert "batch(2) is [((4, 16), 'float32'), ((4, 16), 'float32')], not batch(0)'s" in user_pieces.pp_problem(short)


class Root(nn.Module):
    """sqrt of a parameter that starts at 0: the check's noise pushes some of it below 0 (NaN in both runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.zeros(sharded_model.WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale.sqrt()


def test_the_pieces_check_takes_nan_as_equal_and_names_a_piece_one_micro_batch_breaks():
    module = nn.Sequential(nn.Linear(16, 16), Root(), nn.Linear(16, 16))
    um = user_model.UserModel(module=module, batch=sharded_model.batch, loss=F.mse_loss, pp_layers=list)
    assert user_pieces.pp_problem(um) is None  # NaN where NaN in both runs is equal
    # a BatchNorm needs more than one row per micro-batch in training: 8 micro-batches of the 8 rows leave one
    norm = nn.Sequential(nn.Linear(16, 16), nn.BatchNorm1d(16), nn.Linear(16, 16))
    um = user_model.UserModel(module=norm, batch=sharded_model.batch, loss=F.mse_loss, pp_layers=list)
    why = user_model.cannot_run(um, "pp_gpipe", 2, 8)
    assert why.startswith("pp_gpipe with SHARDED_MICROBATCHES=8: on one micro-batch, pp_layers' piece 1 (BatchNorm1d)")
    assert user_model.cannot_run(um, "pp_gpipe", 2, 4) is None
    assert "do not split into SHARDED_MICROBATCHES=3" in user_model.cannot_run(um, "pp_gpipe", 2, 3)


def test_the_built_in_model_is_a_user_model_the_host_checks_accept():
    # one trainer, pipeline trainer and reference for both: the built-in model declared as a UserModel takes every
    # product strategy, its pipeline pieces pass the host's checks, and an sp_gather naming no submodule is refused
    um = built_in.built_in(16, 3, 4, 4)
    assert all(user_model.supported(um, s) is None for s in STRATEGIES)
    assert user_model.not_dividing(um, "sp", 2) is None and user_pieces.pp_problem(um) is None
    assert train.fsdp_units(um) == list(um.module.blocks)  # the head stays with the root
    assert user_model.contraction(um, "tp") == 4 * 16
    bad = dataclasses.replace(um, sp_gather="tail")
    assert user_model.not_dividing(bad, "sp", 2) == "sp: sp_gather='tail' names no submodule of the model"
