"""The ddp experiment's step check: this rank's parameters, buffers and last averaged gradient against the
single-process reference (check.py), and what it found wrong in words (the record's ``wrong_found``, as the
collectives' checks say it): the parameters and buffers that differ from single-process training, where the
first one is, and, under the exact rule, what the last step's averaged gradient holds instead of the reference's:
values that belong elsewhere in it (misplaced) or nowhere (wrong values: a part never averaged, a stale or
wrongly reduced one).

The step's outputs end with its flat gradient (workload.step_outputs), so the harness also names a gradient
that holds the check run's again (stale; suite/harness/checks.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn as nn

from suite.api import DistContext, Session, sgd_rule, verify

from . import buffer_bound
from . import models as training
from . import workload
from .check import shared_reference, buffers_compared, check_rule, flat_buffers, unchecked_reason


def where(model: nn.Module, i: int) -> str:
    """Element ``i`` of the flat parameters as ``name[index]``."""
    for name, p in model.named_parameters():
        if i < p.numel():
            return f"{name}[{i}]"
        i -= p.numel()
    return f"[{i}]"


def wrong_values(
    what: str, mine: torch.Tensor, ref: torch.Tensor, bad: torch.Tensor, at=str, rule: str = ""
) -> list[str]:
    """The line for the wrong elements (``bad``) of ``what`` (``mine``) against the reference's (``ref``): how many,
    the first (``at(i)`` names element ``i``) and ``rule``."""
    n = int(bad.sum().item())
    if not n:
        return []
    i = int(bad.nonzero()[0].item())
    got, want = (f"{x[i].item():z.10g}" for x in (mine, ref))
    tail = f"; {rule}" if rule else ""
    return [
        f"{n} wrong value(s) in the {what} against single-process training (first at {at(i)}: {got} where {want} "
        f"was expected{tail})"
    ]


def gradient(mine: torch.Tensor, ref: torch.Tensor) -> list[str]:
    """Under the exact rule: what the last step's averaged gradient holds where it differs from the reference's
    (``ref``; all NaN where the reference has none kept), in verify's words."""
    if torch.isnan(ref).all():
        return []
    bad = mine != ref
    if not bad.any():
        return []
    return [f"the last step's averaged gradient: {verify.describe(mine, ref, bad)}"]


def _buffer_check(
    ctx: DistContext, ref_bufs, tol, module: nn.Module, rule: sgd_rule.SgdRule, steps: int, seen: dict
) -> verify.Wrong:
    """Wrong elements of this rank's buffers against the reference's for this rank (``buffers_compared``), beyond
    ``tol`` (rank 0's: per rank and element, ``Reference.buffer_tol``; None: exact), with what they are."""
    mine = flat_buffers(list(module.buffers()))
    bounded = buffer_bound.bn_after_linear(getattr(module, "module", module)) is not None  # DDP's or the model
    if not buffers_compared(rule, steps, bounded) or mine.numel() == 0:
        return verify.Wrong(0)
    if ctx.rank != 0:
        both = torch.empty(2 * ctx.world_size, mine.numel(), dtype=mine.dtype, device=mine.device)
    else:
        ref_bufs = ref_bufs.to(mine)
        both = torch.cat([ref_bufs, torch.zeros_like(ref_bufs) if tol is None else tol.to(mine)])
    dist.broadcast(both, src=0, group=ctx.group)
    ref_bufs, tol = both.split(ctx.world_size)
    diff = (mine - ref_bufs[ctx.rank]).abs()
    seen.update(buffer_max_abs_diff=diff.max().item(), buffer_tol=tol[ctx.rank].max().item())
    bad = ~(diff <= tol[ctx.rank])  # NaN is wrong
    return verify.Wrong(int(bad.sum().item()), wrong_values("BatchNorm buffers", mine, ref_bufs[ctx.rank], bad))


TURN_S = 5.0
"""The most seconds rank 0 trains the reference before it tells the other ranks whether it is done (one small
broadcast; at most a quarter of the run's collective timeout): they never wait in one collective longer than that,
however many steps the reference takes."""


def in_turns(ctx: DistContext, work: Callable[[float], bool] | None) -> None:
    """Rank 0 calls ``work(deadline)`` (``time.monotonic``; True: done) until done, and after each call every rank
    learns from it whether it is (the other ranks pass None): each of their waits lasts one turn, not the work."""
    turn = min(TURN_S, ctx.timeout_s / 4)
    done = torch.zeros(1, dtype=torch.int32, device=ctx.device)
    while True:
        if ctx.rank == 0:
            done.fill_(int(work(time.monotonic() + turn)))
        dist.broadcast(done, src=0, group=ctx.group)
        if done.item():
            return


def step_check(
    v: workload.Variant, ctx: DistContext, settings: workload.DdpSettings, session: Session
) -> Callable[[workload.Step, dict], Callable[[], int] | None]:
    """``check_of`` of workload.step_buffers: a step case's check against the reference, None where
    ``unchecked_reason`` says why it has none."""
    if unchecked_reason(v, settings):
        return lambda step, seen: None
    return lambda step, seen: reference_check(v, step, ctx, settings, session, seen)


def reference_check(
    v: workload.Variant,
    step: workload.Step,
    ctx: DistContext,
    settings: workload.DdpSettings,
    session: Session,
    seen: dict,
) -> Callable[[], verify.Wrong]:
    """Wrong elements of this rank's parameters (and buffers) against the reference after ``step.steps`` steps, with
    what they are (and, under the exact rule, what the last averaged gradient holds instead). Rank 0
    trains the reference (shared by every case of the model and kind in this session) in turns (``in_turns``: the
    other ranks' waits never outlast the collective timeout, however long the run) and broadcasts it."""
    rule = check_rule(v, ctx.world_size)

    def check() -> verify.Wrong:
        mine = training.flat_params(step.model)
        ref_bufs = buf_tol = None
        reference = shared_reference(session, ctx, v, settings, step.seed) if ctx.rank == 0 else None
        in_turns(ctx, None if reference is None else lambda deadline: reference.advance(step.steps, deadline))
        if reference is not None:  # parameters, per element max|g| and max|p|, the last averaged gradient: 1 broadcast
            *ref, ref_bufs = reference.at(step.steps)
            buf_tol = reference.buffer_tol(step.steps, rule)
            grad = reference.grad_at(step.steps)
            ref.append(torch.full_like(mine, float("nan")) if grad is None else grad)
            ref = torch.cat([t.to(mine) for t in ref])
        else:
            ref = torch.empty(4 * mine.numel(), dtype=mine.dtype, device=mine.device)
        dist.broadcast(ref, src=0, group=ctx.group)
        ref, g_max, p_max, ref_grad = ref.split(mine.numel())
        tol = rule.tol(step.steps, g_max.double(), p_max.double())  # per element (0 where exact)
        diff = (mine - ref).abs()
        worst = float(torch.as_tensor(tol).max().item())
        said = rule.describe(step.steps, worst)
        seen.update(steps=step.steps, tol=worst, max_abs_diff=diff.max().item(), rule=said)
        bad = ~(diff.double() <= tol)  # NaN is wrong
        rule_said = said if not rule.exact else f"exact, after {step.steps} step(s)"
        found = wrong_values("parameters", mine, ref, bad, lambda i: where(step.model, i), rule_said)
        if found and rule.exact:
            found += gradient(workload.flat_grads(step.model), ref_grad)
        wrong = verify.Wrong(int(bad.sum().item()), found)
        return wrong + _buffer_check(ctx, ref_bufs, buf_tol, step.model, rule, step.steps, seen)

    return check
