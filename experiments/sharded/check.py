"""The sharded experiment's check: every strategy against single-process training on the same global batches.

``Reference`` trains the model in one process (no torch.distributed) for as many SGD steps as the checked
model took, on the same global batches (workload.batch): the batch's rows split into the strategy's
data-parallel shards (``workload.dp_size``: the world for ddp and FSDP2, 2 for the 2-D mesh, 1 for TP/SP),
each shard's gradient through the same forward and backward as a rank runs, the shards' gradients averaged
in rank order (sum of g_i x 1/k, the value a correct average has), then the same SGD step. For
``fsdp2_bf16`` the reference does what the mixed-precision policy does: forward and backward on bfloat16
copies of its float32 parameters (and a bfloat16 input), the gradients cast to float32 before the average,
the SGD step on the float32 parameters.

After the check step and after the timed steps, every rank's whole parameters (DTensor shards gathered
with ``full_tensor``) are compared with the reference's. Rule (``check_rule`` in the record):

- ``exact`` for ddp and the FSDP2 strategies (bfloat16 too) at 1 or 2 ranks: each rank computes its rows'
  gradient with the same operations on the same shapes and dtypes as the reference's shard (FSDP2 gathers
  the parameters bit for bit),
  the average of two float32 terms does not depend on their order (a + b = b + a) and halving is exact,
  and the SGD update is elementwise; so a correct strategy equals the reference bit for bit.
- otherwise ``tol``, per parameter tensor p, after S steps: 2 x S x e(p) + S x (S - 1) x e(largest), with
  e(p) = lr x 2R x u x max|g_p| + 2 x 2^-24 x max|p|, where u is the unit roundoff of the dtype the step
  computes in (float32 2^-24; bfloat16 parameters 2^-8: a parameter one float32 ulp away may round to
  another bfloat16 value), R the terms whose order or rounding differs from
  the reference's: the ranks whose partial sums are added in another order (the world: data-parallel
  averages of more than two terms, TP's row-parallel all_reduce, SP's reduce_scatter); with tensor
  parallelism (tp, sp, 2d) also the 4d / tp terms of each rank's partial dot product in ``down``, whose
  blocking BLAS chooses for the shard's shape, not the whole's; for bfloat16 parameters every Linear layer
  the activations pass (2 x depth + 1) on top. Per step the gradient moves by
  at most 2R u max|g|, the update by lr times that and its float32 rounding by one ulp of the parameter
  (x 2 for safety); from the second step on, earlier differences move every later gradient (the layers are
  coupled), hence the second term from the largest tensor's step term, as in the DDP experiment's rule.
  max|g_p| and max|p| are the reference's largest over the steps so far. A tensor whose bound is not below
  half of max|p_S - p_0|, how far the reference moved it in S steps (what a gradient scaled by 2 adds to it,
  to first order), is not compared after those S steps: its bound would pass that fault by construction.
  ``check_rule`` counts them (bfloat16 at 4 ranks: none after the check step, 8 of 14 after 2 steps, all
  from 5 on; float32 stays under 3% of it over 25 steps, ddp at 4 ranks: tests/unit/test_sharded.py).

Pipeline strategies (``pp_*``, experiments/sharded/pipeline.py): each rank's stage parameters against the
reference with the batch split into ``SHARDED_MICROBATCHES`` shards (the micro-batches): the schedule sums
the micro-batches' gradients in order and divides by m, the reference sums g_i x 1/m in the same order:
``exact`` when m is a power of two (scaling by 2^-k is exact), else ``tol`` with R = m.

A planted wrong strategy (``fsdp2_scaled``, ``tp_wrong_shard``, ``pp_unscaled``, ``pp_misrouted``) is checked
under the rule of the strategy it imitates, and fails it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from suite.api import sgd_rule

from . import workload
from .strategies import get as strategy_of


def check_rule(
    strategy: str, world: int, contraction: int = 0, layers: int = 0, microbatches: int = 1
) -> sgd_rule.SgdRule:
    """How a strategy's parameters are compared with the reference's (module docstring), from the model's numbers
    (train.check_rule reads them off a UserModel, the built-in one too): ``contraction``, the largest
    ``in_features`` of a Linear the strategy's plan makes row-parallel (the built-in model's ``down``: 4d), whose
    dot products are split over the tensor-parallel ranks; ``layers``, with bfloat16 parameters, the most layers
    holding parameters an activation can pass, each rounding it (the built-in model's 2 x depth + 1 Linears);
    ``microbatches``: m of a pipeline strategy, whose reference splits the batch into m shards."""
    st = strategy_of(strategy)
    u = sgd_rule.U_BF16 if st.bf16 else sgd_rule.U32
    if st.pipeline is not None:  # (g_1 + ... + g_m) / m == g_1/m + ... + g_m/m bit for bit when m is a power of 2
        exact, terms, why = microbatches & (microbatches - 1) == 0, microbatches, "micro-batch scaling"
    else:
        exact, terms = st.exact_at_two and world <= 2, world
        why = "bfloat16 parameters" if st.bf16 else "float32 sum order"
        if st.plan is not None:  # each rank's partial dot products in the row-parallel Linear
            terms += contraction // (world // st.dp_size(world))
        if st.bf16:
            terms += layers
    return sgd_rule.SgdRule(world=world, terms=terms, u=u, lr=workload.LR, exact=exact, why=why, per="parameter")


FORMULA = (
    "per parameter tensor x: " + sgd_rule.SgdRule.FORMULA + ", S steps, u the compute dtype's unit roundoff, "
    "R = world (+ 4d / tp with tensor parallelism, + 2 x depth + 1 Linear layers for bfloat16 parameters; "
    "pipelines: R = micro-batches)"
)
"""The bound the record's ``check_tol`` is the largest of."""


class Reference:
    """Single-process SGD on the global batches, the rows split into ``dp`` shards (module docstring). ``build()``
    returns a new seeded model on the device and the global batches (train.reference, of any UserModel); ``loss``
    is every shard's loss; ``bf16``: forward and backward on a bfloat16 copy."""

    def __init__(self, build, dp: int, bf16: bool = False, loss=F.mse_loss) -> None:
        self._build, self.dp, self.bf16, self.loss = build, dp, bf16, loss
        self._start()
        self._snapshots: dict[int, tuple[list[torch.Tensor], list[float], list[float]]] = {}

    def _start(self) -> None:
        self.net, self.batches = self._build()
        self.opt = torch.optim.SGD(self.net.parameters(), lr=workload.LR)
        # the bfloat16 compute copy: its values are the float32 parameters', copied before every step
        self.low = self._build()[0].to(torch.bfloat16) if self.bf16 else None
        self.steps = 0
        self.start = [p.detach().clone() for p in self.net.parameters()]
        self.g_max = [0.0 for _ in self.net.parameters()]
        self.p_max = [p.abs().max().item() for p in self.net.parameters()]

    def _step(self) -> None:
        dp = self.dp
        x, y = self.batches[self.steps % workload.BATCHES]
        avg: list[torch.Tensor] | None = None
        net = self.net if self.low is None else self.low
        if self.low is not None:  # bfloat16 compute copies of the float32 parameters, as FSDP2 gathers them
            with torch.no_grad():
                for lo, p in zip(self.low.parameters(), self.net.parameters()):
                    lo.copy_(p)
        for i in range(dp):
            n = x.shape[0] // dp
            net.zero_grad()
            xi = x[i * n : (i + 1) * n]
            low = self.low is not None and xi.is_floating_point()  # the policy casts floating inputs only
            self.loss(net(xi.to(torch.bfloat16) if low else xi), y[i * n : (i + 1) * n]).backward()
            g = [p.grad.float() * (1.0 / dp) for p in net.parameters()]
            avg = g if avg is None else [a + b for a, b in zip(avg, g)]
        for p, g in zip(self.net.parameters(), avg):
            p.grad = g
        self.g_max = [max(m, g.abs().max().item()) for m, g in zip(self.g_max, avg)]
        self.opt.step()
        self.steps += 1
        self.p_max = [max(m, p.abs().max().item()) for m, p in zip(self.p_max, self.net.parameters())]

    def at(self, steps: int) -> tuple[list[torch.Tensor], list[float], list[float]]:
        """Parameters after ``steps`` steps and, per tensor, max|g| and max|p| up to then (snapshots kept)."""
        if steps not in self._snapshots:
            if steps < self.steps:
                self._start()
            while self.steps < steps:
                self._step()
            params = [p.detach().clone() for p in self.net.parameters()]
            self._snapshots[steps] = (params, list(self.g_max), list(self.p_max))
        return self._snapshots[steps]

    def moved(self, steps: int) -> list[float]:
        """Per parameter tensor, the farthest any of its elements moved from the start in ``steps`` steps (max|p_S -
        p_0|): what a gradient scaled by 2 adds to it, to first order. Not steps x lr x max|g|: an element's
        gradients change sign from step to step, and its largest gradient need not be its largest move."""
        return [(p - p0).abs().max().item() if p.numel() else 0.0 for p, p0 in zip(self.at(steps)[0], self.start)]


def expected(
    rule: sgd_rule.SgdRule, reference: Reference, steps: int, owned: list[int] | None = None
) -> tuple[list[torch.Tensor], list[float], list[bool]]:
    """The reference's parameters after ``steps`` steps, each tensor's bound and whether it is compared
    (``SgdRule.comparable``), from the reference alone (the same on every rank); ``owned``: a pipeline
    stage's tensors, taken after the bounds are computed over the whole model, whose largest tensor's
    carried term every tensor's bound includes (the layers are coupled across stages too)."""
    ref, g_max, p_max = reference.at(steps)
    tols = rule.tols(steps, g_max, p_max)
    use = rule.comparable(reference.moved(steps), tols)
    if owned is None:
        return ref, tols, use
    return [ref[i] for i in owned], [tols[i] for i in owned], [use[i] for i in owned]


def compare(mine: list[torch.Tensor], ref: list[torch.Tensor], tols: list[float]) -> tuple[int, float, list[float]]:
    """(wrong elements, largest |difference|, per tensor largest |difference|) of ``mine`` against ``ref``
    under per-tensor tolerances (NaN is wrong, and counts as an infinite difference)."""
    wrong, worst = 0, []
    for a, b, tol in zip(mine, ref, tols):
        diff = (a.double() - b.double()).abs().nan_to_num(nan=float("inf"))
        wrong += int((~(diff <= tol)).sum().item())
        worst.append(float(diff.max().item()) if diff.numel() else 0.0)
    return wrong, max(worst, default=0.0), worst


def found(wrong: int, names: list[str], worst: list[float], tols: list[float], rule: str) -> list[str]:
    """The check's finding in words (the record's ``wrong_found``): how many elements are off single-process
    training, the first parameter tensor that is (by name), by how much against its bound, and the rule."""
    if not wrong:
        return []
    i = next(i for i, (w, t) in enumerate(zip(worst, tols)) if not w <= t)
    return [
        f"{wrong} wrong value(s) in the parameters against single-process training (first in {names[i]}: off by "
        f"up to {worst[i]:z.3g} where {tols[i]:z.3g} is allowed; {rule})"
    ]
