"""The DDP check's tolerance at the default model size and step count (pure, in-process; tens of seconds,
so not in the unit tier): two correct averages of the same gradients in different summation orders must
stay within the bound after the steps a default run checks, and a sum instead of an average must not."""

import torch

from experiments.ddp import cases as ddp_exp

from experiments.ddp import check as ddp_check
from experiments.ddp import workload as ddp_exp_workload

STEPS = 25
"""What `make bench-cpu` checks after its timed steps (WARMUP_ITERS 5 + ITERS 20)."""


def _pairwise(per_rank):
    """A correct 4-rank average summed as a tree ((0 + 2) + (1 + 3)), as a ring or tree all_reduce may."""
    return [(ts[0] * 0.25 + ts[2] * 0.25) + (ts[1] * 0.25 + ts[3] * 0.25) for ts in zip(*per_rank)]


def test_two_correct_summation_orders_stay_within_the_tolerance_after_the_checked_steps():
    torch.set_num_threads(1)
    s = ddp_exp_workload.DdpSettings()  # the default MLP: rounding differences carried through 25 steps of it
    ref = ddp_check.Reference("mlp", s, 4, torch.device("cpu"), 1, False, True)
    good, g_max, p_max, _ = ref.at(STEPS)
    tree = ddp_check.Reference("mlp", s, 4, torch.device("cpu"), 1, False, True)
    tree._mean = _pairwise
    other = tree.at(STEPS)[0]
    plain = next(v for v in ddp_exp.variants(s) if v.model == "mlp" and v.label == "ddp")
    rule = ddp_check.check_rule(plain, 4)  # float32 on the wire, 4 ranks: a tolerance
    diff = (other - good).abs().double()
    assert diff.max() > 0  # the orders do differ
    tol = rule.tol(STEPS, g_max.double(), p_max.double())
    assert (diff <= tol).all(), f"{int((diff > tol).sum())} correct elements outside the bound"
    summed = ddp_check.Reference("mlp", s, 4, torch.device("cpu"), 1, False, True)
    summed._mean = lambda per_rank: [sum(ts) for ts in zip(*per_rank)]  # a hook that forgets to divide
    # 42% of the elements here (the rest barely move in 25 steps: small or dead units' gradients)
    assert ((summed.at(STEPS)[0] - good).abs().double() > tol).float().mean() > 0.3
