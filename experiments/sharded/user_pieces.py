"""Your own model's pipeline pieces (``UserModel.pp_layers``), checked before any rank starts and cut into stages:
whether the pieces are the module's forward (``pp_problem``), what each piece's output is (``outputs``), and
whether a stage split trains something on every rank and sends a gradient back across every boundary
(``stages_problem``). user_model.py calls these from its launcher check; they take the UserModel as given.
"""

from __future__ import annotations

import copy
from collections import Counter


def _pieces(um, module) -> list:
    """``um.pp_layers(module)`` as a list; ValueError naming what is wrong with it."""
    import torch

    try:
        pieces = list(um.pp_layers(module))
    except Exception as e:  # noqa: BLE001 - whatever the user's function raises is their input's
        raise ValueError(f"pp_layers(module) failed ({type(e).__name__}: {e})") from None
    own = {id(m) for m in module.modules()}
    if not pieces or any(not isinstance(p, torch.nn.Module) or id(p) not in own for p in pieces):
        raise ValueError(
            "pp_layers(module) must return a list of submodules of the module it is given, in forward order"
        )
    return pieces


def _through(pieces: list, x, first: int = 0):
    """``x`` through the pieces in order under seed 0 (dropout draws as the module's forward draws); ValueError
    naming a piece (numbered from ``first``) that fails or returns something other than one tensor."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for i, piece in enumerate(pieces, first):
            try:
                x = piece(x)
            except Exception as e:  # noqa: BLE001
                raise ValueError(
                    f"pp_layers' piece {i} ({type(piece).__name__}) failed on the previous one's output ({e})"
                ) from None
            if not isinstance(x, torch.Tensor):
                raise ValueError(
                    f"pp_layers' piece {i} ({type(piece).__name__}) returned {type(x).__name__}, not one tensor"
                )
    return x


def _shapes(batch: tuple) -> list:
    return [(tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in batch]


def pp_problem(um) -> str | None:
    """Why ``um.pp_layers`` is not the module's forward in pieces (UserModel.pp_layers), or None. On two copies of
    the module in the mode the factory left it, the same seeded noise added to both's parameters (a layer that is
    the identity at first would hide its place), one run whole and one through its pieces (each under seed 0), on
    ``batch(0)``: the pieces must be the copy's submodules holding each of its parameters once, each return one
    tensor, and give the module's output and every parameter's gradient of the loss bit for bit (a step left out,
    steps out of order, a detach or a connection across pieces changes one or the other). Every batch must have
    batch(0)'s shapes: a pipeline's stages fix theirs on the first step."""
    import torch

    from .workload import BATCHES

    whole, module = copy.deepcopy(um.module), copy.deepcopy(um.module)
    try:
        pieces = _pieces(um, module)
    except ValueError as e:
        return str(e)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # the same seeded noise on both: a layer zeroed at first (the identity) shows its place
        for a, b in zip(whole.parameters(), module.parameters()):
            if a.is_floating_point():
                noise = 0.01 * torch.randn(a.shape, generator=g).to(a)
                a.add_(noise)
                b.add_(noise)
    held = Counter(id(q) for p in pieces for q in p.parameters())
    for name, q in module.named_parameters():
        if held[id(q)] == 0:
            return f"pp_layers' pieces leave out {name}: every parameter must be in a piece (a stage trains it)"
        if held[id(q)] > 1:
            return f"pp_layers' pieces hold {name} {held[id(q)]} times: each parameter must be in exactly one piece"
    x, y = um.batch(0)
    for k in range(1, BATCHES):
        if _shapes(um.batch(k)) != _shapes((x, y)):
            return (
                f"batch({k}) is {_shapes(um.batch(k))}, not batch(0)'s {_shapes((x, y))}: a pipeline fixes its shapes"
            )
    try:
        h = _through(pieces, x)
    except ValueError as e:
        return str(e)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        want = whole(x)
    if not isinstance(want, torch.Tensor) or want.shape != h.shape or not _same(want, h):
        same = isinstance(want, torch.Tensor) and want.shape == h.shape
        apart = f"up to {(want - h).abs().max().item():z.3g} apart" if same else f"an output of shape {tuple(h.shape)}"
        return (
            f"pp_layers' pieces applied in order to batch(0)'s inputs do not give the module's output ({apart}): "
            "list every step of its forward, in order"
        )
    try:
        um.loss(want, y).backward()
        um.loss(h, y).backward()
    except Exception as e:  # noqa: BLE001 - the user's loss
        return f"loss(outputs, targets).backward() failed on batch(0) ({type(e).__name__}: {e})"
    for (name, p), q in zip(whole.named_parameters(), module.parameters()):
        if (p.grad is None) != (q.grad is None) or (p.grad is not None and not _same(p.grad, q.grad)):
            return (
                f"pp_layers' pieces give {name} another gradient than the module's forward does (the same output): "
                "list every step of its forward, in order (a detach, or a connection across pieces?)"
            )
    return None


def _same(a, b) -> bool:
    """Equal bit for bit, NaN where NaN (a parameter the noise pushed out of its function's domain in both runs)."""
    import torch

    return a.dtype == b.dtype and torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True)


def outputs(um, microbatches: int) -> list[tuple[int, str, bool]]:
    """Per piece, its output on the first micro-batch of ``batch(0)`` (a copy of the module, seed 0): bytes, dtype
    and whether it requires grad (a pipeline sends a gradient back across a boundary only where it does)."""
    module = copy.deepcopy(um.module)
    x = um.batch(0)[0]
    h, out = x[: len(x) // microbatches], []
    for i, piece in enumerate(_pieces(um, module)):
        h = _through([piece], h, i)
        out.append((h.numel() * h.element_size(), str(h.dtype).removeprefix("torch."), h.requires_grad))
    return out


def stages_problem(um, strategy: str, world: int, microbatches: int) -> str | None:
    """Why the pieces cut into ``strategy``'s stages at ``world`` ranks would not train (stage s on rank s mod
    world, pipeline.stage_bounds), or None: a rank whose stages hold no parameter (it would have nothing to
    step), or a boundary whose activation does not require grad (detached, or not floating point: no gradient
    would go back across it, and the stages before it would not train)."""
    from .pipeline import stage_bounds, stages_per_rank

    pieces = _pieces(um, um.module)  # which pieces hold parameters: no copy needed to count them
    stages = world * stages_per_rank(strategy)
    bounds = stage_bounds(len(pieces), stages)
    holds = [any(True for _ in p.parameters()) for p in pieces]
    for rank in range(world):
        mine = [i for s in range(rank, stages, world) for i in range(*bounds[s])]
        if not any(holds[i] for i in mine):
            return f"{strategy} at {world} ranks: rank {rank}'s stages (pieces {mine}) hold no parameter to train"
    try:
        grads = [g for _, _, g in outputs(um, microbatches)]
    except ValueError as e:  # a piece that cannot take one micro-batch (a BatchNorm of one row, say)
        return f"{strategy} with SHARDED_MICROBATCHES={microbatches}: on one micro-batch, {e}"
    for s, (_, end) in enumerate(bounds[:-1]):
        if not grads[end - 1]:
            return (
                f"{strategy} at {world} ranks: piece {end - 1}'s output, sent from stage {s} to {s + 1}, does not "
                "require grad (detached, or not floating point): no gradient would go back across it"
            )
    return None
