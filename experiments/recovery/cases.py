"""Recovery: one case per fault schedule (RECOVERY_FAULTS) and checkpoint mode (RECOVERY_CKPT_MODES), each a
training job of its own under torchrun elastic restarts (experiments/recovery/elastic.py), checked bitwise
against the same job without faults.

Declarations only (what one rank runs is in workload.py)."""

from __future__ import annotations

from suite.api import Bytes, Case, Timing, experiment_test

from .measure import KINDS
from .workload import recovery_buffers

EXPERIMENT = "recovery"


def cases(cfg, world_size: int) -> list[Case]:
    s = cfg.recovery
    out = []
    for text, faults in s.schedules():
        for mode in s.ckpt_modes:
            out.append(
                Case(
                    experiment=EXPERIMENT,
                    op="recovery",
                    label=f"elastic-{mode}-{text}",
                    identity={"strategy": "elastic", "fault": text, "ckpt_mode": mode},
                    bytes=Bytes(size_bytes=0, count=0, dtype="float32", bw_op=None),
                    timing=Timing(max_iters=1, warmup=0, normalisation="none: the barrier after the job"),
                    fields={"ckpt_every": s.ckpt_every, "job_world": s.world, "bug": s.bug},
                    provenance=KINDS,
                    build=recovery_buffers(s.plan(faults, mode, s.ckpt_dir)),
                )
            )
    return out


test_recovery = experiment_test(cases)
