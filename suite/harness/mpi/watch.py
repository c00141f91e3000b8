"""The MPI process group's watchers (suite/harness/mpi/group.py): each op it issues, told to whoever registered
in its ``watchers`` (the sharded experiment's inventory: CommDebugMode does not see a Python group's ops)."""

from __future__ import annotations

import torch

from suite import op_table

WATCHED = {op.mpi: op.watched_as for op in op_table.OPS if op.mpi is not None}
"""Each op method of ``MpiGroup`` that the op table (suite/op_table.py) maps a row to, and the collective's name
its watchers are told."""


def _tensors(args) -> list[torch.Tensor]:
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(_tensors(a))
    return out


def _watched(what: str, method):
    def op(self, *args, **kwargs):
        for watch in self.watchers:
            watch(what, _tensors(args))
        return method(self, *args, **kwargs)

    op.__name__, op.__doc__ = method.__name__, method.__doc__
    return op


def watch_ops(cls) -> None:
    """Wrap each op method of ``cls`` (suite/harness/mpi/group.py's MpiGroup) so that it first tells each of the
    group's ``watchers`` the collective's name and the tensors it was given."""
    for method, what in WATCHED.items():
        setattr(cls, method, _watched(what, getattr(cls, method)))
