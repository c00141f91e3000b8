"""The small training workloads more than one experiment trains: the source article's model and data, and the
communication-heavier MLP (re-exported as ``suite.api.models``).

The source article's complete DDP example trains ``nn.Linear(1024, 10)`` on 10,000 random samples, batch 32 per
rank, SGD lr 0.01, CrossEntropyLoss. ``SOURCE`` holds those numbers; ``source_model``/``make_dataset`` build the
same objects, seeded so that every rank holds *the same* dataset. ``mlp`` is an MLP whose hidden width is chosen
to reach a parameter budget, with one BatchNorm1d so that DDP has buffers to broadcast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass(frozen=True, kw_only=True)
class SourceSpec:
    """The numbers of the article's DDP example."""

    in_features: int = 1024
    classes: int = 10
    n_samples: int = 10_000
    batch_per_rank: int = 32
    lr: float = 0.01
    epochs: int = 5


SOURCE = SourceSpec()

DEFAULT_DATA_SEED = 1234
"""Seed of the synthetic dataset; identical on every rank."""


def source_model(seed: int = 0) -> nn.Module:
    """``nn.Linear(1024, 10)``, initialised from ``seed`` (same seed -> same weights)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Linear(SOURCE.in_features, SOURCE.classes)


@dataclass(frozen=True, kw_only=True)
class MLPSpec:
    """Shape of the communication-heavy MLP."""

    in_features: int = 1024
    hidden: int = 1024
    hidden_layers: int = 3
    """Number of hidden Linear(hidden, hidden) layers after the input layer."""
    classes: int = 10

    @property
    def n_params(self) -> int:
        h = self.hidden
        return (self.in_features * h + h) + 2 * h + self.hidden_layers * (h * h + h) + (h * self.classes + self.classes)


def mlp_spec_for(params: int, *, in_features: int = 1024, hidden_layers: int = 3, classes: int = 10) -> MLPSpec:
    """The MLP whose hidden width gives about ``params`` parameters (at least 16 wide)."""
    if params <= 0:
        raise ValueError(f"parameter budget must be > 0, got {params}")
    # n(h) = L h^2 + (in + classes + L + 3) h + classes: solve for h.
    a, b, c = hidden_layers, in_features + classes + hidden_layers + 3, classes - params
    h = int((-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)) if a else int(-c / b)
    return MLPSpec(in_features=in_features, hidden=max(16, h), hidden_layers=hidden_layers, classes=classes)


def mlp(spec: MLPSpec, seed: int = 0) -> nn.Module:
    """Linear -> BatchNorm1d -> ReLU -> [Linear -> ReLU] x L -> Linear."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = [nn.Linear(spec.in_features, spec.hidden), nn.BatchNorm1d(spec.hidden), nn.ReLU()]
        for _ in range(spec.hidden_layers):
            layers += [nn.Linear(spec.hidden, spec.hidden), nn.ReLU()]
        layers.append(nn.Linear(spec.hidden, spec.classes))
        return nn.Sequential(*layers)


def make_dataset(
    n_samples: int = SOURCE.n_samples,
    in_features: int = SOURCE.in_features,
    classes: int = SOURCE.classes,
    seed: int = DEFAULT_DATA_SEED,
) -> torch.utils.data.TensorDataset:
    """The article's dataset (randn inputs, random labels), seeded: identical on every rank."""
    g = torch.Generator().manual_seed(seed)
    return torch.utils.data.TensorDataset(
        torch.randn(n_samples, in_features, generator=g), torch.randint(0, classes, (n_samples,), generator=g)
    )
