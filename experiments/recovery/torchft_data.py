"""The torchft strategy's workload, data order and weight digests, shared by the replicas (``torchft_worker``) and
the one-process reference (``torchft_check``); free of torchft, so the checks import it without the Lighthouse.

The workload is the source article's (``suite.api.models``): ``nn.Linear(1024, 10)`` on its seeded 10,000 samples
of 1,024 features."""

from __future__ import annotations

import hashlib

import torch
import torch.nn as nn

from suite.api import models

LR, BATCH = models.SOURCE.lr, models.SOURCE.batch_per_rank
"""The article's SGD learning rate, and its batch per replica (the command line's; the suite's cases take the
job's batch per rank)."""


def model(seed: int) -> nn.Module:
    """The article's ``nn.Linear(1024, 10)``, its weights drawn from ``seed``."""
    return models.source_model(seed)


def dataset() -> torch.utils.data.TensorDataset:
    """The article's seeded synthetic dataset, the same in every process."""
    return models.make_dataset(seed=models.DEFAULT_DATA_SEED)


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
