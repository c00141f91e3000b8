"""The torchft strategy's data order and weight digests, shared by the replicas (``torchft_worker``) and the
one-process reference (``torchft_check``); free of torchft, so the checks import it without the Lighthouse."""

from __future__ import annotations

import hashlib
import importlib

import torch
import torch.nn as nn

DATA = "experiments.ddp.models:make_dataset"
"""The DDP experiment's seeded synthetic dataset (the article's 10,000 samples of 1,024 features)."""
MODEL = "experiments.ddp.models:source_model"
"""The DDP experiment's small model, ``nn.Linear(1024, 10)``."""
DATA_SEED, LR, BATCH = 1234, 0.01, 32
"""The article's: the dataset's seed, SGD's learning rate, and the batch per replica on the command line."""


def load_factory(spec: str):
    """The function that ``module:function`` names."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def sample_ids(seed: int, step: int, rank: int, groups: int, batch: int, n_samples: int) -> list[int]:
    """The sample ids of replica rank ``rank`` at ``step``: a seeded permutation walked in order, every step
    reserving ``groups`` batches (a replica missing from a step leaves its batch unused)."""
    perm = torch.randperm(n_samples, generator=torch.Generator().manual_seed(seed))
    start = (step * groups + rank) * batch
    return [int(perm[(start + i) % n_samples]) for i in range(batch)]


def digest(model: nn.Module) -> str:
    """sha256 of the parameters' bytes, in order: equal digests, bitwise equal weights."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]
