"""SHARDED_MODEL in the recovery lab (experiments/recovery/user.py): a bad factory is rejected by the launcher
before any rank starts, one line and exit 2; a good one reaches every case's plan, and its batch's rows are cut into
one shard per rank (elastic) or replica group (torchft), as the sharded experiment cycles its batches. The jobs on
the worked example are run by tests/dist/test_recovery_elastic_dist.py."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from examples import sharded_model
from experiments.recovery import strategies, user
from experiments.recovery.cases import cases
from experiments.recovery.settings import RecoverySettings
from experiments.recovery.torchft_data import Data
from experiments.recovery.user import BATCHES
from experiments.sharded import workload as sharded_workload
from suite.launch import cli as launch

HERE = "tests.unit.test_recovery_user_model"
EXAMPLE = "examples.sharded_model:build"


def not_a_user_model():
    return nn.Linear(4, 4)


def bfloat16():
    """The worked example in bfloat16: numpy has no such dtype, so the state digests cannot read it."""
    return dataclasses.replace(sharded_model.build(), module=sharded_model.Regressor().to(torch.bfloat16))


BAD = {
    "unimportable": ({"SHARDED_MODEL": "no_such_package.models:build"}, "cannot import no_such_package.models"),
    "wrong type": ({"SHARDED_MODEL": f"{HERE}:not_a_user_model"}, "must return experiments.sharded.user_model"),
    "bfloat16": ({"SHARDED_MODEL": f"{HERE}:bfloat16"}, "through numpy, which has no torch.bfloat16"),
    "rows": (
        {"SHARDED_MODEL": EXAMPLE, "RECOVERY_WORLD": "3"},
        f"SHARDED_MODEL={EXAMPLE} with RECOVERY_WORLD=3: the model's batch has 8 rows, which do not split over 3",
    ),
}


def _check(monkeypatch, tmp_path, env: dict) -> int:
    monkeypatch.setenv("RECOVERY_DIR", str(tmp_path / "ckpt"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    argv = ["--check", "--nproc", "2", "--experiments", "recovery", "--results-root", str(tmp_path / "r")]
    return launch.main(argv)


@pytest.mark.parametrize("what", sorted(BAD))
def test_a_bad_model_is_one_line_and_status_2_before_any_rank(what, monkeypatch, capsys, tmp_path):
    env, words = BAD[what]
    code = _check(monkeypatch, tmp_path, env)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: SHARDED_MODEL") and err.count("\n") == 1, err
    assert words in err, err
    assert not (tmp_path / "r").exists()


def test_the_worked_example_passes_the_hosts_check(monkeypatch, capsys, tmp_path):
    assert _check(monkeypatch, tmp_path, {"SHARDED_MODEL": EXAMPLE}) == 0, capsys.readouterr().err


def test_every_cases_plan_trains_the_factorys_model_on_its_rows(tmp_path, monkeypatch):
    plans = []
    for name in ("elastic_runner", "torchft_runner"):
        monkeypatch.setattr(strategies, name, lambda plan: plans.append(plan))
    s = RecoverySettings(faults=("kill:1@6",), ckpt_dir=str(tmp_path))
    mine = cases(SimpleNamespace(recovery=s, sharded=SimpleNamespace(model=EXAMPLE)), 2)
    assert [c.fields["model"] for c in mine] == [EXAMPLE, EXAMPLE]
    assert [(p.model, p.batch_per_rank) for p in plans] == [(EXAMPLE, 4)] * 2  # its 8 rows over 2 ranks
    plans.clear()
    mlp = cases(SimpleNamespace(recovery=s, sharded=SimpleNamespace(model="")), 2)
    assert [c.fields["model"] for c in mlp] == ["mlp", "mlp"]
    assert [(p.model, p.batch_per_rank) for p in plans] == [("", 8)] * 2  # no SHARDED_MODEL: the MLP, as before


def test_the_ranks_shards_are_the_steps_batch_in_order_cycling_as_the_sharded_experiment():
    assert BATCHES == sharded_workload.BATCHES
    mine = user.Yours(EXAMPLE, 2)
    for step in (0, 1, BATCHES, BATCHES + 3):
        x, y = sharded_model.batch(step % BATCHES)
        parts = [mine.shard(step, r) for r in range(2)]
        assert torch.equal(torch.cat([p[0] for p in parts]), x) and torch.equal(torch.cat([p[1] for p in parts]), y)
    a, b = mine.module(), mine.module()
    assert a is not b and all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_torchft_names_a_replicas_samples_by_their_rows_and_drops_the_missing_ones():
    data = Data(seed=0, groups=2, batch=4, model=EXAMPLE)
    assert data.ids(5, 0) == [0, 1, 2, 3] and data.ids(5, 1) == [4, 5, 6, 7]
    assert torch.equal(data.batch(5, 1)[0], sharded_model.batch(5 % BATCHES)[0][4:])
    assert isinstance(data.model(), sharded_model.Regressor)
