"""Your own model in the recovery lab: ``SHARDED_MODEL=module:function``, the sharded experiment's factory
(experiments/sharded/user_model.py; the core's suite.api.user_model loads it and checks it for both), trained by
both strategies instead of the suite's MLP.

Every process of a job (an elastic rank, a torchft replica group, the torchft reference) calls the factory once
(after ``torch.manual_seed(0)``) and trains its own copy (``copy.deepcopy``) of the module it built, with the
model's ``loss`` and the strategy's optimizer. Step k takes the global batch ``batch(k mod BATCHES)``, as the
sharded experiment does (experiments/sharded/workload.py), its rows cut into ``RECOVERY_WORLD`` equal shards: the
elastic job's rank r takes shard r; under torchft the replica of rank r among those that take part in a step takes
shard r, and the shards of the replicas missing from it are that step's dropped samples (named by their row in the
step's batch).

Checked on the host before any rank starts (``check_world``: one line, exit status 2): the factory loads and gives
a UserModel (user_model.load), two calls give the same weights and batch and its module can be copied
(user_model.not_reproducible), its state has dtypes numpy reads (the digests hash its bytes), and its batch's rows
split over ``RECOVERY_WORLD``.
"""

from __future__ import annotations

import copy

from suite.api import ConfigError, user_model

BATCHES = 4
"""Distinct global batches: step k takes ``batch(k mod BATCHES)``, the sharded experiment's cycle (a unit test keeps
the two equal)."""


def check(name: str, world: int) -> int:
    """The rows of the model's batch; ConfigError (one line) where ``name`` does not load, is not reproducible, or
    its rows do not split over ``world`` ranks."""
    um = user_model.load(name)
    why = user_model.not_reproducible(um, user_model.load(name))
    if why:
        raise ConfigError(f"SHARDED_MODEL={name}: {why}")
    bad = sorted({str(t.dtype) for t in um.module.state_dict().values() if not _numpy_reads(t)})
    if bad:
        raise ConfigError(
            f"SHARDED_MODEL={name}: the recovery checks hash the model's state through numpy, which has no "
            f"{', '.join(bad)}; give its parameters and buffers a dtype numpy has (e.g. float32)"
        )
    rows = len(um.batch(0)[0])
    if rows % world:
        raise ConfigError(
            f"SHARDED_MODEL={name} with RECOVERY_WORLD={world}: the model's batch has {rows} rows, which do not "
            f"split over {world} ranks (elastic) or replica groups (torchft)"
        )
    return rows


def _numpy_reads(t) -> bool:
    """Whether the state digests (worker.digest, torchft_data.digest) can read ``t``'s bytes through numpy."""
    try:
        t.detach().reshape(-1)[:1].numpy()
    except TypeError:
        return False
    return True


def check_world(s, world_size: int, cfg=None) -> None:
    """The launcher's check (suite.case.ExperimentSpec.check_world): the run's SHARDED_MODEL, if any, against the
    job's world (RECOVERY_WORLD; the suite's own world does not train it)."""
    name = model_of(cfg)
    if name:
        check(name, s.world)


def model_of(cfg) -> str:
    """The run's SHARDED_MODEL (empty: the suite's MLP)."""
    sharded = getattr(cfg, "sharded", None)
    return getattr(sharded, "model", "") or ""


class Yours:
    """The factory's model in one process: a copy of its module to train, its loss, and the rows of a step."""

    def __init__(self, name: str, world: int):
        self.um = user_model.load(name)
        self.world = world
        self.batches = [self.um.batch(k) for k in range(BATCHES)]
        self.loss = self.um.loss

    def module(self):
        """A new copy of the module as the factory built it."""
        return copy.deepcopy(self.um.module)

    def rows(self) -> int:
        return len(self.batches[0][0])

    def shard(self, step: int, rank: int) -> tuple:
        """Shard ``rank`` (of ``world``) of step ``step``'s global batch: its inputs and targets."""
        x, y = self.batches[step % len(self.batches)]
        lo, hi = self.ids(rank)[0], self.ids(rank)[-1] + 1
        return x[lo:hi], y[lo:hi]

    def ids(self, rank: int) -> list[int]:
        """The rows of a step's batch in shard ``rank``."""
        b = self.rows() // self.world
        return list(range(rank * b, (rank + 1) * b))
