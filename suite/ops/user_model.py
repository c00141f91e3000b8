"""A model of your own, named by ``SHARDED_MODEL=module:function``: what its factory returns (``UserModel``), its
loader (``load``) and the check that two calls give what every process needs (``not_reproducible``), shared by the
experiments that train it (each adds its own rules: experiments/<name>/README.md). A factory takes no argument and
returns ``UserModel(module=..., batch=..., loss=..., ...)``; it is called after ``torch.manual_seed(0)`` in every
process that trains it, each of which trains its own copy (``copy.deepcopy``) of the module."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from suite.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class UserModel:
    """What a ``SHARDED_MODEL`` factory returns."""

    module: Any
    """A ``torch.nn.Module`` with its initial weights (seeded: every call builds the same ones)."""
    batch: Callable[[int], tuple]
    """``batch(step) -> (inputs, targets)``: the global batch of a step; ranks split its rows (dim 0)."""
    loss: Callable[[Any, Any], Any]
    """``loss(outputs, targets)`` -> a scalar tensor (e.g. ``torch.nn.functional.mse_loss``)."""
    tp_plan: Mapping[str, Any] | None = None
    """``parallelize_module``'s plan for the whole module (submodule name -> ParallelStyle); None: no ``tp``
    or ``2d``."""
    sp_plan: Mapping[str, Any] | None = None
    """The plan under sequence parallelism (``sp``, a mesh over the world): every rank takes every row and its
    slice of the inputs along ``seq_dim``; the plan's styles say where activations stay sequence-sharded (a norm
    ``SequenceParallel()``, a Linear pair ``ColwiseParallel(input_layouts=Shard(seq_dim))`` and
    ``RowwiseParallel(output_layouts=Shard(seq_dim))``), and the module's output, sharded along ``seq_dim`` as
    its input was, is gathered before the loss (a DTensor output is made whole whatever its placement).
    None: no ``sp``."""
    seq_dim: int = 1
    """The inputs' and outputs' sequence dimension (``sp``)."""
    sp_gather: str | None = None
    """Under ``sp``, the submodule (a name as in ``named_modules``) whose input is gathered along ``seq_dim``, so
    that it and what follows it run on the whole sequence on every rank (e.g. a replicated head after the
    sequence-parallel blocks); None: the module's output is gathered before the loss."""
    fsdp_units: tuple[str, ...] | None = None
    """Submodules to ``fully_shard`` (names as in ``named_modules``), before the root; None: each child that has
    parameters (the children of a ModuleList, ModuleDict or Sequential child one by one)."""
    pp_layers: Callable[[Any], Sequence[Any]] | None = None
    """``pp_layers(module)`` -> the module's forward as pieces in order, so that ``module(x)`` is
    ``pieces[-1](... pieces[0](x))``: submodules of the module it is given, each taking and returning one tensor,
    every parameter in exactly one piece (e.g. ``lambda m: [m.embed, *m.layers, m.head]``). The pipelines cut
    them into contiguous stages (the later stages take the remainder). None: no pipelines."""
    layers: int | None = None
    """With bfloat16 parameters (``fsdp2_bf16``), the most layers holding parameters that an activation passes,
    each rounding it: the check's tolerance grows with them (the sharded experiment's check); None: every module
    that holds parameters of its own (an upper bound)."""


def load(name: str) -> UserModel:
    """The factory's UserModel (seeded); ConfigError naming what is wrong."""
    module, sep, function = name.partition(":")
    if not sep or not module or not function:
        raise ConfigError(f"SHARDED_MODEL={name!r} is not module:function (e.g. examples.sharded_model:build)")
    try:
        mod = importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any error importing the user's module is their input's
        raise ConfigError(f"SHARDED_MODEL={name!r}: cannot import {module} ({type(e).__name__}: {e})") from None
    factory = getattr(mod, function, None)
    if not callable(factory):
        raise ConfigError(f"SHARDED_MODEL={name!r}: {module} has no function {function!r}")
    import torch

    torch.manual_seed(0)
    try:
        um = factory()
    except Exception as e:  # noqa: BLE001
        raise ConfigError(f"SHARDED_MODEL={name!r}: {function}() failed ({type(e).__name__}: {e})") from None
    if not isinstance(um, UserModel) or not isinstance(um.module, torch.nn.Module):
        got = type(um.module if isinstance(um, UserModel) else um).__name__
        raise ConfigError(
            f"SHARDED_MODEL={name!r}: {function}() must return experiments.sharded.user_model.UserModel "
            f"with a torch.nn.Module as module, got {got}"
        )
    return um


def not_reproducible(a: UserModel, b: UserModel) -> str | None:
    """Why two calls of the factory do not give what the ranks and the reference need: a new module each call
    (built after the seed, not once at import), the same weights (every rank calls the factory), the same batch,
    a module ``copy.deepcopy`` can copy (each case and the reference train a copy); or None."""
    import copy

    import torch

    if a.module is b.module:
        return "the factory returned the same module object twice; build a new one on each call"
    pa, pb = a.module.state_dict(), b.module.state_dict()
    if list(pa) != list(pb) or any(not torch.equal(pa[k], pb[k]) for k in pa):
        return "two calls of the factory built different weights; seed them (torch.manual_seed) or build them fixed"
    xa, xb = a.batch(0), b.batch(0)
    if len(xa) != 2 or any(not torch.equal(u, v) for u, v in zip(xa, xb)):
        return "batch(0) must return (inputs, targets), the same tensors on every call"
    try:
        copy.deepcopy(a.module)
    except Exception as e:  # noqa: BLE001 - whatever the user's module holds that cannot be copied
        why = str(e).splitlines()[0] if str(e) else ""
        return f"copy.deepcopy cannot copy its module ({type(e).__name__}: {why}); each case trains a copy"
    return None
