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
from experiments.sharded import check, shapes, user_model, user_workload, workload
from experiments.sharded.settings import STRATEGIES
from suite.launch import cli as launch
from tests import user_models
from tests.conftest import ROOT

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
        {"SHARDED_MODEL": "examples.sharded_model:build", "SHARDED_STRATEGIES": "fsdp2,pp_1f1b"},
        2,
        "pp_1f1b runs on the built-in model only",
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
        "error: SHARDED_MODEL=examples.sharded_model:build with SHARDED_STRATEGIES=pp_gpipe: pp_gpipe runs on "
        "the built-in model only: its stages are the built-in model's layers\n"
    )
    assert not (tmp_path / "r").exists()


def test_which_strategies_a_model_takes():
    with_plan, without = sharded_model.build(), no_plan()
    takes = {s for s in STRATEGIES if user_model.supported(with_plan, s) is None}
    assert takes == {"ddp", "fsdp2", "fsdp2_keep", "fsdp2_bf16", "tp", "2d"}
    sequence = {s for s in STRATEGIES if user_model.supported(sharded_model.build_sequence(), s) is None}
    assert sequence == takes | {"sp"}
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
    assert user_workload.fsdp_units(um) == list(um.module.layers)  # the ModuleList's children, one unit each
    named = user_model.UserModel(module=um.module, batch=um.batch, loss=um.loss, fsdp_units=("layers.1",))
    assert user_workload.fsdp_units(named) == [um.module.layers[1]]


def test_the_tolerance_counts_the_row_parallel_dot_product():
    um = sharded_model.build()
    assert user_model.contraction(um) == sharded_model.HIDDEN  # `out` is row-parallel: in_features
    rule = user_workload.CheckRule("tp", 2, 0, 0, contraction=sharded_model.HIDDEN)
    assert rule.terms == 2 + sharded_model.HIDDEN // 2 and not rule.exact
    assert user_workload.CheckRule("2d", 4, 0, 0, contraction=64).terms == 4 + 64 // 2
    assert user_workload.CheckRule("fsdp2", 2, 0, 0).exact and user_workload.CheckRule("ddp", 4, 0, 0).terms == 4
    # sequence parallel: the sp_plan's row-parallel Linear, over every rank
    sp = user_workload.check_rule("sp", 4, sharded_model.build_sequence())
    assert sp.contraction == sharded_model.HIDDEN and sp.terms == 4 + sharded_model.HIDDEN // 4 and not sp.exact


def test_bfloat16_checks_a_user_model_as_the_built_in_one():
    # FSDP2's mixed-precision policy on your model: the reference runs a bfloat16 copy of the factory's module
    # (floating inputs cast, as the policy casts them), averages float32 gradients and steps float32
    # parameters; exact at 2 ranks, and beyond, R counts every layer that holds parameters (each rounds the
    # activation in bfloat16: the built-in model's 2 x depth + 1 Linears)
    um = sharded_model.build()
    rule = user_workload.check_rule("fsdp2_bf16", 4, um)
    assert rule.layers == 2 * sharded_model.LAYERS and rule.terms == 4 + 2 * sharded_model.LAYERS
    assert rule.u == 2.0**-8 and user_workload.check_rule("fsdp2_bf16", 2, um).exact
    ref = user_workload.Reference(um, 2, "cpu", bf16=True)
    assert {p.dtype for p in ref.low.parameters()} == {torch.bfloat16} and ref.low is not um.module
    params, g_max, _ = ref.at(2)
    fp32 = user_workload.Reference(um, 2, "cpu").at(2)[0]
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
    rule = user_workload.check_rule("fsdp2_bf16", 4, um)
    assert not rule.exact and rule.terms == 4 + user_workload.layers(um)
    ref = user_workload.Reference(um, 4, "cpu", bf16=True)
    doubled = user_workload.Reference(um, 4, "cpu", bf16=True)
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
    assert user_workload.sp_output_problem(torch.zeros(8, 4, 16), local, 1) is None
    whole = user_workload.sp_output_problem(torch.zeros(8, 8, 16), local, 1)
    assert "output has shape (8, 8, 16), not this rank's slice" in whole and "output_layouts=Shard(1)" in whole
    assert "returned tuple, not one tensor" in user_workload.sp_output_problem((local,), local, 1)
    assert "not this rank's slice" in user_workload.sp_output_problem(torch.zeros(8), local, 1)
