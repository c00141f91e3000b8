"""The ``Kind`` record: what one kind of DDP case runs, so that no other module of the experiment asks a variant for
its kind's name (tests/unit/test_ddp_kinds.py holds that rule). A variant (workload.Variant) is a kind plus its
model, label, hook and DDP arguments; the modules read the kind's fields: workload.py builds the step from them,
cases.py its byte model and fields, check.py its reference, derived.py its baselines and derived numbers.
Pure (no torch at import)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Kind:
    """One kind of case: a training step (with or without communication, DDP or manual) or the gradient
    all_reduce alone, or an initial-state sync."""

    name: str
    op: str
    """The records' ``op``."""
    trains: bool = True
    """An optimizer step on the model: checked against single-process training (its parameters and buffers), and
    timed with the forward, backward and optimizer step. False: the gradient all_reduce alone, the init syncs."""
    communicates: bool = True
    """False: each rank steps on its own gradient (no communication, no comparison with the reference)."""
    steps_ranks: int | None = None
    """How many ranks take the step (rank 0 alone if 1; the others return at once); None: every rank."""
    ddp_wrapped: bool = False
    """The model is wrapped in DistributedDataParallel (its buckets, its buffer broadcast, its constructor)."""
    coalesced: bool = False
    """The manual step all-reduces every gradient as one flat tensor (else one all_reduce per parameter)."""
    accumulates: bool = False
    """DDP_ACCUM micro-batches per optimizer step (``no_sync`` or a sync per micro-batch)."""
    init: bool = False
    """An initial-state sync from each rank's own state (a broadcast per tensor, or DDP's constructor)."""

    @property
    def ddp_step(self) -> bool:
        """One DDP forward and backward per optimizer step: DDP's logger logs each step, and with the plain
        all_reduce the measured overlap applies."""
        return self.ddp_wrapped and self.trains and not self.accumulates

    @property
    def baseline(self) -> bool:
        """A step the others are compared with: one without communication, or the all_reduce alone."""
        return not self.communicates or not self.trains


SOLO = Kind(name="solo", op="solo_step", communicates=False, steps_ranks=1)
LOCAL = Kind(name="local", op="local_step", communicates=False)
ALL_REDUCE = Kind(name="all_reduce", op="all_reduce", trains=False)
DDP = Kind(name="ddp", op="ddp_step", ddp_wrapped=True)
MANUAL = Kind(name="manual", op="manual_allreduce_step")
MANUAL_COALESCED = Kind(name="manual_coalesced", op="manual_coalesced_step", coalesced=True)
ACCUM = Kind(name="accum", op="ddp_accum_step", ddp_wrapped=True, accumulates=True)
INIT_BROADCAST = Kind(name="init_broadcast", op="broadcast", trains=False, init=True)
DDP_INIT = Kind(name="ddp_init", op="ddp_init", trains=False, ddp_wrapped=True, init=True)

KINDS = {k.name: k for k in (SOLO, LOCAL, ALL_REDUCE, DDP, MANUAL, MANUAL_COALESCED, ACCUM, INIT_BROADCAST, DDP_INIT)}
