"""Recovery: one case per strategy (RECOVERY_STRATEGIES), fault schedule (RECOVERY_FAULTS) and, for the elastic
strategy, checkpoint mode (RECOVERY_CKPT_MODES), each a training job of its own (experiments/recovery/
strategies.py), checked against the same job without faults (elastic) or the one-process reference of exactly
the steps committed (torchft).

Declarations only (what one rank runs is in workload.py)."""

from __future__ import annotations

from suite.api import Bytes, Case, Timing, experiment_test

from . import user
from .measure import KINDS
from .plan import STRATEGIES
from .strategies import CASES

EXPERIMENT = "recovery"


def _case(label: str, identity: dict, fields: dict, build) -> Case:
    return Case(
        experiment=EXPERIMENT,
        op="recovery",
        label=label,
        identity=identity,
        bytes=Bytes(size_bytes=0, count=0, dtype="float32", bw_op=None),
        timing=Timing(max_iters=1, warmup=0, normalisation="none: the barrier after the job"),
        fields=fields,
        provenance=KINDS,
        build=build,
    )


def model_plan(cfg) -> dict:
    """What the plans take of the run's SHARDED_MODEL (user.py): its name and batch per rank; empty: the MLP."""
    name = user.model_of(cfg)
    if not name:
        return {}
    s = cfg.recovery
    return {"model": name, "batch_per_rank": user.check(name, s.world) // s.world}


def cases(cfg, world_size: int) -> list[Case]:
    s = cfg.recovery
    mine = model_plan(cfg)  # the factory runs here, on each rank, as the host's check ran it
    out = []
    for text, faults in s.schedules():
        fields = {"ckpt_every": s.ckpt_every, "job_world": s.world, "bug": s.bug, "model": mine.get("model", "mlp")}
        for name in s.strategies:
            st = STRATEGIES[name]  # its trait goes in the record: the ETTR model reads it (suite/model/ettr.py)
            for repeat in range(s.repeats):
                for label, identity, own, build in CASES[name](s, st, text, faults, repeat, mine):
                    own = {**fields, "heals_from_peer": st.heals_from_peer, **own}
                    out.append(_case(label, identity, own, build))
    return out


test_recovery = experiment_test(cases)
