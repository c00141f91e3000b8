"""What the harness checks in a case's buffers besides the case's own exact check, and the words for what it found.

A case's ``Buffers.check`` counts the wrong elements of its outputs against the exact expected result. Around
it the harness (suite/harness/runner.py) checks, outside every timed sample:

- the guard bands of every output made by ``verify.output`` (a write past either end of the output);
- the inputs an out-of-place op must leave as they were (``Buffers.inputs``: an op that also wrote into its
  input), compared with a copy taken just before the check run's call;
- an output that holds the check run's result again in the timed buffer sets, built from another seed
  (a stale output: named as such when the check finds it wrong).

Each finding counts its elements as wrong (the case then fails with status 6) and is one line in the
record's ``wrong_found``, with what the case's own check found (``verify.Wrong``).
"""

from __future__ import annotations

import re

import torch
import torch.distributed as dist

from suite.case import Buffers
from suite.harness import verify

FOUND_PER_RANK = 4
"""Lines of ``wrong_found`` each rank contributes: the first of each kind it found (``distinct``)."""
SAMPLE = 1024
"""Elements of each output kept from the check run, to name a stale output in the timed check."""


def inputs_before(b: Buffers) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(input, a copy of it now) for each input the op must leave unchanged."""
    return [(t, t.detach().clone()) for t in b.inputs() if t is not None]


def outputs_sample(b: Buffers) -> list[torch.Tensor]:
    """The first ``SAMPLE`` elements of each output, copied (what ``examine`` compares a later output with)."""
    return [t.detach().reshape(-1)[:SAMPLE].clone() for t in b.outputs() if t is not None]


def examine(
    b: Buffers, op: str, before: list | None = None, earlier: list[torch.Tensor] | None = None
) -> tuple[int, list[str]]:
    """(wrong elements, what they are in words) of one buffer set after its op: the case's own check, the guard
    bands of its outputs, the inputs in ``before`` (``inputs_before``), and, where the check found wrong
    elements, whether an output holds ``earlier`` (``outputs_sample`` of the check run) again."""
    wrong = b.check() if b.check is not None else 0
    found = list(getattr(wrong, "found", ()))
    wrong = int(wrong)
    outs = [t for t in b.outputs() if t is not None]
    for i, t in enumerate(outs):
        for side, k in verify.guard_damage(t):
            wrong += k
            found.append(f"guard band {side} the output overwritten ({op} output {i}: {k} element(s))")
    for i, (t, held) in enumerate(before or ()):
        k = _changed(t, held)
        if k:
            wrong += k
            found.append(f"input {i} of {op} changed by the call at {k} element(s) (an out-of-place op wrote into it)")
    if wrong and earlier:
        for i, (t, e) in enumerate(zip(outs, earlier)):
            now = t.detach().reshape(-1)[:SAMPLE]
            if now.shape == e.shape and now.numel() and torch.equal(now, e) and not verify.is_poison(e).any():
                found.append(f"output {i} of {op} holds the check run's result again (stale: made from other inputs)")
    return wrong, found


def examine_sets(sets: list[Buffers], op: str, earlier: list[torch.Tensor]) -> tuple[int, list[str]]:
    """``examine`` of every timed buffer set: (wrong elements, "timed: ..." for each finding)."""
    wrong, found = 0, []
    for b in sets:
        n, said = examine(b, op, earlier=earlier)
        wrong += n
        found += [f"timed: {f}" for f in said]
    return wrong, found


def found_by_rank(ctx, found: list[str]) -> list[str]:
    """Every rank's first findings, "rank r: ...", in rank order (a collective: every rank of ``ctx.group`` calls it
    alike, once the wrong elements' global count is known)."""
    each: list = [None] * ctx.world_size
    dist.all_gather_object(each, distinct(found)[:FOUND_PER_RANK], group=ctx.group)
    return [f"rank {r}: {line}" for r, lines in enumerate(each) for line in lines or ()]


def distinct(found: list[str]) -> list[str]:
    """The first line of each kind of finding (the same words but for numbers and where: one output of many
    holding poison is one kind), in order."""
    seen, out = set(), []
    for line in found:
        kind = re.sub(r"\d+|\(.*?\)", "", line.split(": ", 1)[-1])
        if kind not in seen:
            seen.add(kind)
            out.append(line)
    return out


def _changed(t: torch.Tensor, held: torch.Tensor) -> int:
    a = t.detach()
    same = (a == held) | (torch.isnan(a) & torch.isnan(held)) if a.dtype.is_floating_point else a == held
    return int((~same).sum().item())
