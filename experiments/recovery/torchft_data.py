"""The torchft strategy's workload, data order and weight digests, shared by the replicas (``torchft_worker``) and
the one-process reference (``torchft_check``); free of torchft, so the checks import it without the Lighthouse.

The workload is the source article's (``suite.api.models``): ``nn.Linear(1024, 10)`` on its seeded 10,000 samples
of 1,024 features; or SHARDED_MODEL's model on its batches (``Data`` with a ``model``: user.py)."""

from __future__ import annotations

import hashlib

import torch
import torch.nn as nn

from suite.api import models

from .user import Yours

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


class Data:
    """What a replica group and the reference train: the article's model and samples (``sample_ids``), or, with
    ``model`` (SHARDED_MODEL's factory), a copy of its module on shard ``rank`` of each step's batch (rows
    split over the ``groups`` replica groups; a sample is named by its row in the step's batch)."""

    def __init__(self, seed: int, groups: int, batch: int, model: str = ""):
        self.seed, self.groups, self.batch_per_rank = seed, groups, batch
        self.yours = Yours(model, groups) if model else None
        self.dataset = None if self.yours else dataset()
        self.loss = self.yours.loss if self.yours else nn.CrossEntropyLoss()

    def model(self) -> nn.Module:
        """A new model in its initial state."""
        return self.yours.module() if self.yours else model(self.seed)

    def ids(self, step: int, rank: int) -> list[int]:
        """The samples of replica rank ``rank`` (among those taking part) at ``step``."""
        if self.yours:
            return self.yours.ids(rank)
        return sample_ids(self.seed, step, rank, self.groups, self.batch_per_rank, len(self.dataset))

    def batch(self, step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Replica rank ``rank``'s inputs and targets at ``step``."""
        return self.yours.shard(step, rank) if self.yours else self.dataset[self.ids(step, rank)]
